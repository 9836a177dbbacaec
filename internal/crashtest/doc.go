// Package crashtest holds weir's crash tests (DESIGN.md, "Recovery", G1 to
// G4): a kill -9 torture test and deterministic crash-point tests of a
// Kinesis pipeline with leases, checkpoints in DynamoDB and a recovery log,
// all on local servers (kinesalite and dynalite, see internal/localaws).
// The package has no API: everything is in its tests.
//
// # The torture test
//
// TestCrashTorture starts the servers with persistent data directories,
// creates a 4-shard stream, and keeps putting records with unique
// increasing IDs while a child process (the test binary re-executed, see
// TestMain) runs the pipeline: the Kinesis receiver with leases and
// checkpoints in DynamoDB under a fixed worker ID, a directory recovery
// log, and one output that appends every batch to a file ("begin <time>",
// one line per record, "end <time>", fsync), with a stream.Listener that
// adds "done <time>" once the driver logged the batch's completion. The
// child's lease-table client inspects every checkpoint write against the
// completions its recovery log holds, and journals it beside the output.
// The parent kills the child with SIGKILL at random moments, restarting it
// each time; then it stops producing, lets a last child output every
// record, stops it with SIGTERM (it drains and exits 0) and checks the
// file: no record lost (G1), a re-run batch with exactly the records of
// its first run, in the same order (G2), no batch run again after its done
// line (G3), and batch times increasing but for the re-runs. It also checks
// that no checkpoint write passed the completed records (G4), that the
// drained log holds nothing pending, and that every lease was handed back
// with its shard's last record checkpointed. With WEIR_TORTURE_KILLS >= 10
// a run in which no batch ran twice fails: it did not test G2.
// TestCrashTortureDynamoLog does the same with the recovery log in
// DynamoDB (dynamolog.Config), which any worker can read: the
// checkpoints must stop at the completed records all the same.
//
// TestCrashTortureState (and TestCrashTortureStateDynamoLog, with the log
// and its snapshots in DynamoDB) adds state: the child also keeps a running
// count per key with UpdateStateByKey and with MapWithState, snapshotted
// every three batches, and writes both after every batch. Kills land in
// turn inside a snapshot write, right after a restarted child loaded a
// snapshot (before or during its replay) and at random; after the drain,
// both counts must exactly equal the count per key of the records
// delivered: no update applied twice or missed. BenchmarkStateReplay
// measures the replay of a restart against the plain read.
//
// The kill moments come from a seeded random generator; the seed is logged.
// Every fifth kill instead waits for the child to be inside a batch's
// output (a begin line with no end yet), so that long runs surely re-run
// batches.
//
// Every child's spy also reads the lease before each checkpoint write: a
// write that succeeds while the lease table named another owner (a
// worker writing a lease it lost) fails the test, as a G4 violation does.
//
// TestCrashTortureDynamoSink adds the DynamoDB sink (sink/dynamodb): the
// child puts one item per record and adds 1 to a count per key in a
// dynalite table; every other kill lands right after the child's first
// write, inside a batch partly written that the restart runs again. After
// the drain the table must hold exactly one item per record delivered and
// each key's count of them: no write applied twice or missed.
//
// # Outages, zombies and balance
//
// TestOutageDynamoDB and TestOutageKinesis put a faults.Proxy between a
// child and one service, and take the service away while records keep
// arriving: down (connections refused and cut), then partitioned
// (connections held silent), each for WEIR_OUTAGE_SECONDS. After each
// outage the child must output every record put before its end (the time
// it took is logged) and must have logged a warning about the service;
// at the end the drained output is checked as the torture test's is.
// The ...DynamoLog variants keep the recovery log in DynamoDB.
//
// TestZombieWorker runs two workers (child processes with their own IDs,
// logs and outputs) on one stream, stops one with SIGSTOP past its leases
// until the other took them all, resumes it, and checks both outputs
// together: no record lost (G1), duplicates counted, and no checkpoint
// written by a worker that lost its lease.
//
// TestLeaseBalance (WEIR_BALANCE=1) starts one worker on a 64-shard
// stream, lets it take every lease, starts two more, and reports the time
// until each holds 21 or 22 leases (seconds and take cycles) and the
// duplicates the moves delivered. It is a measurement, not a timed
// assertion, and takes half a minute or more, so it is kept out of the
// default run.
//
// Environment variables:
//
//   - WEIR_TORTURE_KILLS: the number of kills of each torture test (default
//     3, to keep CI fast; WEIR_TORTURE_KILLS=50 for a long run; from 10 on,
//     a batch must have run twice).
//   - WEIR_TORTURE_SEED: the seed of the kill moments (default: the time),
//     to replay a failing run's schedule.
//   - WEIR_OUTAGE_SECONDS: the length of each outage of the outage tests
//     (default 4, past the 3 s lease duration; WEIR_OUTAGE_SECONDS=30 for
//     a long run). Below 20 s the child's Kinesis attempt timeout is a
//     quarter of it, so that a partition times attempts out within it;
//     from 20 s on the child keeps the default attempt timeout.
//   - WEIR_BALANCE=1: run TestLeaseBalance.
//   - TestFleetCountTorture's kills are WEIR_TORTURE_KILLS (default 2 for
//     it) at moments drawn from WEIR_TORTURE_SEED.
//   - WEIR_FLEET_RECORDS: the records the fleet tests put (default 5000;
//     WEIR_FLEET_RECORDS=50000 for a long run).
//   - TestFleetKinesisSinkTorture's kills are WEIR_TORTURE_KILLS (default 2
//     for it) and its pauses WEIR_FLEET_PAUSES (default 1; 2 for
//     TestFleetCountPauses), their order and moments drawn from
//     WEIR_TORTURE_SEED (WEIR_TORTURE_KILLS=8 WEIR_FLEET_PAUSES=6 for a
//     long run, about a minute).
//   - TestFleetDeduplicateTorture's kills and pauses of reader workers are
//     the same variables, with the same defaults (2 and 1), and so are
//     TestFleetDynamoSinkTorture's.
//   - WEIR_FLEET_MERGE=1: TestFleetDynamoSinkTorture kills its paused
//     worker across the split, merges the split's children, and restarts
//     the worker after the merged shard's writes, whose lineage must fence
//     its replayed batches of the split shard off (some 35 s instead of 20).
//
// # The fleet tests
//
// TestFleetCountTorture builds examples/fleetcount and runs 3 workers of it
// (processes, each on its own state directory) on a 4-shard stream:
// records of 64 keys, each key's on every shard, put in parts, a kill -9
// of a random worker holding leases between parts, each restarted once the others hold
// every lease it held (so leases move each time), and one split of a shard
// of the intermediate stream at its hash key range's middle. Once every
// shard of both streams is checkpointed at its end, every worker gets
// SIGTERM and must exit 0, and the count table must equal the count of each
// key put, exactly; a mismatch prints each wrong key's expected and got
// count and the workers' output. TestFleetCountNoKills starts the 3 workers
// and puts the records at once (leases move by balance steals only), and
// TestFleetCountSettledLeases puts them once the leases are shared (the
// workers started one at a time, each once those before it share every
// lease; no lease moves while there are records). The first two are exact
// because each shard's state moves with its lease (state per shard); with
// state per worker they fail.
//
// TestFleetKinesisSinkTorture runs 3 workers of the crash test's child
// pipeline (processes with their own worker IDs, recovery logs and output
// files) on a 4-shard stream, copying every record to a 3-shard stream
// with sink/kinesis and stream.Origins() (version 2 origin tags), some of
// the sink's records failing on purpose, while a producer puts records:
// kill -9s of a worker holding leases, each restarted with its log once
// the others hold every lease it held, pauses (SIGSTOP until the others
// hold its leases, then SIGCONT: a zombie), every other one inside a
// batch's sink output, and a split of a source shard. Once every source
// shard is checkpointed at its end, every worker gets SIGTERM and must
// exit 0; then a pipeline reads the target stream through
// sink/kinesis.Deduplicate and must get every source record exactly once,
// each partition key's in source order (the records missing and those
// more than once are listed on a failure). With version 1 tags (no
// origins) it fails: the records a new lease owner writes again are kept.
//
// TestFleetDeduplicateTorture is the reading side on a fleet: one writer
// (the child pipeline, not killed) copies a 4-shard stream to a 3-shard
// one with origins, and puts the records of one PutRecords call in three
// again up to two lease durations later (copies landing late, across a
// reader's lease move or a reshard); 3 reader workers (child processes
// without a recovery log) share the target stream through a lease table
// and read it through sink/kinesis.Deduplicate, whose filters are state
// per shard, into a MapWithState keeping each partition key's list of IDs
// (state per shard too), written after every batch to a DynamoDB table,
// the longest list per key kept. Readers are killed and paused as in
// TestFleetKinesisSinkTorture, a target shard is split midway, and its
// children are merged again before the last event (a child of two
// parents, whose filter is both parents' merged). After
// the drains the table must hold every source record exactly once, each
// key's in source order (the records missing and those more than once are
// listed on a failure), and the readers' output files every record at
// least once. With the filters' snapshots loaded empty, or a merge's
// child given one parent's filter, it fails (in one run of three for the
// latter): copies of records read before a lease moved or a reshard are
// kept.
//
// TestFleetDynamoSinkTorture is the DynamoDB sink's on a fleet: 3 workers
// of the child pipeline share a 4-shard stream, put at 150 records a
// second, and write each record with sink/dynamodb and stream.Origins()
// as an update of the item of its bucket (64 buckets of the partition
// key's hash, each in one shard and then in one of its split's children):
// a count, the last ID and the list of IDs, one update in ten losing its
// answer after it was applied. Workers are killed and paused as in
// TestFleetKinesisSinkTorture, and the first pause is the moment of the
// split: the paused worker held the shard split, and goes on only once
// the others completed batches of both children, so that its batch in
// flight writes the parent's records after the children's. After the
// drain every item must hold exactly its bucket's records, each once, in
// shard order, the output files every record. With the lineage fence of
// the children's versions disabled it fails (a parent's records counted
// twice), as it does with versions compared by > instead of >=, with
// batch-time versions on the fleet, or with one item's writes sent
// together.
//
// # Crash points
//
// TestCrashPoints crashes an in-process pipeline exactly at one point (a
// block logged but not yet checkpointed, a checkpoint committed, outputs
// done but the completion not logged, ...): from that instant nothing the
// "dead" pipeline does takes effect (its log appends, DynamoDB calls and
// output writes fail). A second pipeline on the same log then must deliver every
// record, with duplicates only from the batch that ran again. An
// inspecting DynamoDB client checks at every checkpoint write that it does
// not pass the completed records, whatever the log (G4).
//
// TestCrashTakeOverByAnotherWorker is G1 in a fleet: worker "a", on its own
// log, dies for good with stored blocks not completed; worker "b",
// with another ID and another log, takes the shards over once the leases
// expired and must deliver every record (at least once: records may come
// twice, none may be lost).
//
// TestCrashTornLogEntry kills the child, leaves a torn entry at the end of
// its log, and checks the restart drops it and goes on.
//
// The tests need only Go, Node.js and npm (see internal/localaws); they run
// on Unix systems, which have kill -9.
package crashtest
