// Package leasetable keeps which worker processes each Kinesis shard, and
// how far, in a DynamoDB table laid out like the Kinesis Client Library's
// (KCL) lease table, so a KCL application's table can be taken over as it
// is.
//
// It has two parts:
//
//   - Table is the lease and checkpoint table: one item per shard, every write
//     a single-item conditional write on the lease owner and counter, so a
//     worker that lost a lease can never write its checkpoint again
//     (checkpoint.ErrLeaseLost).
//   - Coordinator runs one worker's side of the lease protocol: it renews the
//     leases it holds, takes expired ones, steals towards an even spread,
//     starts a child shard only after its parents reached SHARD_END, and is the
//     checkpoint.Committer a checkpoint.Checkpointer writes through.
//
// Config holds the lease settings; the Kinesis receiver's LeaseConfig embeds
// it.
//
// # Defaults compared with KCL
//
//	                          weir (leasetable)          KCL 2.x
//	lease duration            LeaseDuration 10s          failoverTimeMillis 10s
//	renewals                  one lease per worker       every lease
//	                          every LeaseDuration/3      every failoverTime/3 - epsilon
//	liveness check            one read per other worker  a scan of the whole table
//	                          every LeaseDuration/3      every (failoverTime + epsilon) * 2
//	whole-table scans         at start, when called for, same as the check
//	                          at most 10m apart
//	first take                at start                   at start
//	max leases stolen/cycle   1                          maxLeasesToStealAtOneTime 1
//	shard sync period         60s (reads the table only  shardSyncIntervalMillis 60s
//	                          for a shard without lease)
//	checkpoint                on an interval, by timer   when the record processor calls it
//	expiry rule               nothing of the owner       the lease's counter
//	                          changed for LeaseDuration  unchanged for failoverTime
//	                          on this worker's clock     on this worker's clock
//	lease at SHARD_END        released, never taken again  kept, cleaned up later
//	initial position          LATEST (children TRIM_HORIZON) same
//	leases per worker         no cap (MaxLeases)         maxLeasesForWorker, no cap
//
// A worker proves it runs by renewing one of its leases, and the others
// judge all its leases by it; between scans each reads one lease of every
// other worker per period, and scans the table when a take, a suspected
// death, a release, a renewal gap or a finished shard calls for it (see
// Config.RenewEveryLease). Idle, that is one write per worker and one read
// per pair of workers per period, whatever the number of shards: with 100
// shards, about a fiftieth of the KCL's writes and a tenth of its reads
// per shard-hour (BenchmarkLeaseCost), and a dead worker's leases are
// still taken at most LeaseDuration + TakeInterval after its last renewal
// (the KCL's period makes that up to 4*LeaseDuration). Under load the
// checkpoints, one write per shard per CheckpointInterval when it moved,
// dominate. A worker a lease was stolen from (balancing) learns it at its
// next checkpoint of the shard, which fails and writes nothing, or its next
// scan: until then its reader may deliver what the new owner delivers too.
// RenewEveryLease renews and judges each lease by itself and scans every
// period, as the KCL does; it is needed only while KCL workers share the
// table, since they would take leases whose own counter stands still.
// With one lease stolen per cycle as in KCL, workers starting together
// spread their shards within two lease durations (3 workers and 8 shards:
// each holds 2 or 3).
//
// With Config.StateDir, a restarted worker takes back at once the leases
// of the workers that ran on the same directory before it, which the
// directory's lock proves are gone.
//
// # Wiring a receiver
//
// The Kinesis receiver does this wiring itself when its Config.Leases is
// set (package github.com/weirstream/weir/source/kinesis). By hand: one
// Coordinator and one Checkpointer per worker; the Coordinator is the
// Checkpointer's Committer, and Latest returns the numbers that are safe
// to checkpoint (records of completed batches: guarantee G4); a reader delivers only while Holds(shard):
//
//	coord, _ := leasetable.NewCoordinator(leasetable.CoordinatorConfig{
//		Config: leasetable.Config{TableName: app, DynamoDB: ddb},
//		OnAcquired: func(l leasetable.Lease) {
//			// start reading l.Shard after l.Checkpoint (a sequence number;
//			// at it if !l.WrittenByWeir(): a KCL application wrote it),
//			// or at the initial position it names; then:
//			cp.Register(l.Shard, coord, l.Checkpoint)
//		},
//		OnLost: func(shard string) {
//			// stop reading shard at once, then, without a final checkpoint:
//			cp.Remove(ctx, shard, nil)
//		},
//	})
//	cp, _ := checkpoint.New(checkpoint.Config{Interval: batchInterval, Latest: receiver.LatestCompleted})
//	go coord.Run(ctx); go cp.Run(ctx)
//	// a shard read to its end, all its blocks completed:
//	cp.MarkShardEnd(ctx, shard, coord)
//	// clean shutdown: stop the readers, then
//	cp.Close(ctx)   // last checkpoint of every shard
//	coord.Drain(ctx) // hand the leases back at once
//
// # Table layout
//
// Items are read and written with the attribute names and types of the
// KCL's DynamoDBLeaseSerializer (2.x and 3.x): leaseKey, leaseOwner,
// leaseCounter, checkpoint, checkpointSubSequenceNumber,
// ownerSwitchesSinceCheckpoint, parentShardId (a string set, singular
// name), childShardIds, startingHashKey and endingHashKey, and entityType
// "LEASE" on the leases weir creates. Every write is an update of the
// attributes it changes, so the others (pendingCheckpoint*,
// throughputKBps, anything newer) stay as the KCL left them. Items of other
// KCL 3.x entity types are not leases. Before weir followed the KCL's name
// it wrote the parents as parentShardIds: that attribute is still read,
// and a take of such a lease writes parentShardId too, so a table weir
// wrote migrates as its leases move.
//
// An item that cannot be read as a lease (a leaseCounter stored as a
// string or past 64 bits, a leaseOwner that is a number, a checkpoint that
// is neither a sequence number nor a sentinel, a missing leaseCounter,
// which the KCL cannot take either) is a *BadItemError: it is left alone
// and reported with its fix, and every other lease goes on.
//
// Every checkpoint this package writes also goes to a weirCheckpoint
// attribute (which the KCL ignores and keeps), so that a reader can tell a
// weir checkpoint, which covers whole Kinesis records, from a KCL
// application's, which may stop inside a KPL aggregate (Lease.WrittenByWeir).
//
// A checkpoint write increments leaseCounter, as KCL's does, so the counter is
// a version: every write is conditional on the owner and the counter this
// worker last saw. DynamoDB transactions and TTL are not used (the local test
// server has neither).
package leasetable
