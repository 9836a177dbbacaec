//go:build unix

package crashtest

import (
	"errors"
	"fmt"
	"maps"
	"math/big"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/weirstream/weir/internal/checkpointer"
	"github.com/weirstream/weir/internal/lease"
	"github.com/weirstream/weir/internal/localaws"
)

// The fleet tests run examples/fleetcount, built by the test, as a fleet of
// worker processes on one stream: what a user runs.
const (
	fleetWorkers = 3
	fleetShards  = 4
	fleetKeys    = 64 // each key's records go to every shard: the partition key is the record's ID
	// fleetRecords is the default of WEIR_FLEET_RECORDS, the records put.
	fleetRecords = 5000
	// fleetKills is the default of WEIR_TORTURE_KILLS for the fleet test.
	fleetKills = 2
)

// TestFleetCountSettledLeases starts 3 workers of examples/fleetcount on a
// 4-shard stream one at a time, each once the workers before it share the
// leases of the stream and of the intermediate stream (every shard held,
// each worker holding some), puts WEIR_FLEET_RECORDS records of 64 keys, waits until
// every shard of both streams is checkpointed at its end, stops every
// worker with SIGTERM (each must drain and exit 0) and checks that the
// count table equals the count of each key put, exactly. No lease moves
// while there are records, so even state per worker is exact.
func TestFleetCountSettledLeases(t *testing.T) { fleetNoKills(t, true) }

// TestFleetCountNoKills is TestFleetCountSettledLeases without the waits for
// the leases: the records are put as the 3 workers start together, so the first
// worker takes every lease and the others steal theirs towards balance
// (graceful hand-overs) while records flow. No kill, no split.
// Each shard's count moves with its lease (state per shard).
func TestFleetCountNoKills(t *testing.T) {
	fleetNoKills(t, false)
}

// fleetNoKills starts the 3 workers, waits until they share the leases if
// settled, puts the records, and finishes (see fleet.finish).
func fleetNoKills(t *testing.T, settled bool) {
	records := envInt(t, "WEIR_FLEET_RECORDS", fleetRecords)
	start := time.Now()
	f := newFleet(t, servers.Env(t))
	if settled {
		// One worker at a time, each once the leases are shared by those
		// before: a worker whose first scan comes while another's steal is
		// pending can plan nothing (its pick of the busiest worker may be
		// one whose leases are all being handed over) and take nothing
		// until its next full scan, ScanInterval (10 minutes) later.
		for i, w := range f.workers {
			f.start(w)
			f.awaitHolders(i + 1)
		}
	} else {
		f.startAll()
	}
	f.put(records)
	right := f.finish()
	report(t, fmt.Sprintf("fleetcount, leases settled first %v: %d records, %d of %d keys right; took %v",
		settled, records, right, len(f.truth), time.Since(start).Round(time.Millisecond)))
}

// TestFleetCountTorture is the fleet torture test of issue 20: 3 workers of
// examples/fleetcount on a 4-shard stream, WEIR_FLEET_RECORDS records
// (default 5000; 50000 for the long run) of 64 keys put in parts, with
// WEIR_TORTURE_KILLS (default 2) kill -9s of a random worker holding
// leases between them, each restarted (on its state directory) only once
// the others hold every lease it held, so that leases move each time; and one split of a shard of
// the intermediate stream, at its hash key range's middle, while they run.
// Then every worker gets SIGTERM and must drain and exit 0, and the count
// table must equal the count of each key put, exactly.
// Exact because each shard's state moves with its lease, and a split's
// children start from their parent's (DESIGN.md, "On a fleet: state per
// shard").
func TestFleetCountTorture(t *testing.T) {
	kills, seed, rng := tortureScheduleOf(t, fleetKills)
	records := envInt(t, "WEIR_FLEET_RECORDS", fleetRecords)
	start := time.Now()
	f := newFleet(t, servers.Env(t))
	f.startAll()
	parts := kills + 2
	f.put(records / parts)
	splitAt := kills / 2
	for i := range kills {
		if i == splitAt {
			f.split(rng)
		}
		w := f.victim(minKillDelay+time.Duration(rng.Int64N(int64(maxKillDelay-minKillDelay))), rng)
		pid := w.c.cmd.Process.Pid
		w.c.kill(0)
		t.Logf("kill %d: worker %s (pid %d) killed holding %d leases", i+1, w.h.tuning.worker, pid, len(f.heldBy(pid)))
		f.put(records / parts)
		f.awaitLeasesLeft(pid)
		f.start(w)
	}
	if kills == 0 {
		f.split(rng)
	}
	f.put(records - (parts-1)*(records/parts))
	right := f.finish()
	report(t, fmt.Sprintf("fleetcount torture: %d records, %d kills, seed %d: %d of %d keys right; took %v",
		records, kills, seed, right, len(f.truth), time.Since(start).Round(time.Millisecond)))
}

// TestFleetCountPauses is TestFleetCountTorture with pauses for kills:
// WEIR_FLEET_PAUSES (default 2) times, a random worker holding leases is
// stopped with SIGSTOP (a GC pause, a frozen VM) until the others hold
// every lease it held, then let go on with SIGCONT, a zombie that wakes
// with state, batches in flight and leases it no longer holds, while
// records are put between the pauses. Then every worker gets SIGTERM and
// must drain and exit 0, and the count table must equal the count of each
// key put, exactly: the zombie's writes of batches of shards it lost must
// not count.
func TestFleetCountPauses(t *testing.T) {
	pauses := envInt(t, "WEIR_FLEET_PAUSES", 2)
	seed, rng := tortureSeed(t)
	records := envInt(t, "WEIR_FLEET_RECORDS", fleetRecords)
	start := time.Now()
	f := newFleet(t, servers.Env(t))
	f.startAll()
	parts := pauses + 2
	f.put(records / parts)
	for i := range pauses {
		w := f.victim(minKillDelay+time.Duration(rng.Int64N(int64(maxKillDelay-minKillDelay))), rng)
		pid := w.c.cmd.Process.Pid
		held := len(f.heldBy(pid))
		if err := w.c.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		t.Logf("pause %d: worker %s (pid %d) stopped holding %d leases", i+1, w.h.tuning.worker, pid, held)
		f.put(records / parts)
		f.awaitLeasesLeft(pid)
		if err := w.c.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
	}
	f.put(records - (parts-1)*(records/parts))
	right := f.finish()
	report(t, fmt.Sprintf("fleetcount pauses: %d records, %d pauses, seed %d: %d of %d keys right; took %v",
		records, pauses, seed, right, len(f.truth), time.Since(start).Round(time.Millisecond)))
}

// fleet is a fleet of examples/fleetcount workers on one stream.
type fleet struct {
	t       *testing.T
	env     *localaws.Env
	bin     string
	dir     string
	stream  string
	app     string // also the source's lease table
	table   string // the counts
	workers []*fleetWorker
	next    int              // the next record's ID
	truth   map[string]int64 // the records put, by key
	// leaseBound bounds the waits for leases and checkpoints: a failure
	// guard that grows with the records.
	leaseBound time.Duration
}

// fleetWorker is a worker of the fleet: a state directory, kept across its
// runs, and its current run.
type fleetWorker struct {
	h     *harness // t, and the worker's label for messages
	state string
	runs  int
	c     *child
}

// newFleet builds the example and creates the stream.
func newFleet(t *testing.T, env *localaws.Env) *fleet {
	t.Helper()
	dir := t.TempDir()
	name := localaws.UniqueName(t)
	f := &fleet{t: t, env: env, bin: filepath.Join(dir, "fleetcount"), dir: dir, stream: name, app: name,
		table: name + "-counts", truth: map[string]int64{}, leaseBound: waitLimit}
	build := exec.CommandContext(t.Context(), "go", "build", "-o", f.bin, "../../examples/fleetcount")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build examples/fleetcount: %v\n%s", err, out)
	}
	if err := env.CreateStream(t.Context(), f.stream, fleetShards); err != nil {
		t.Fatal(err)
	}
	for i := range fleetWorkers {
		label := fmt.Sprintf("w%d", i+1)
		f.workers = append(f.workers, &fleetWorker{h: &harness{t: t, tuning: childTuning{worker: label}}, state: filepath.Join(dir, label)})
	}
	return f
}

// startAll starts every worker.
func (f *fleet) startAll() {
	for _, w := range f.workers {
		f.start(w)
	}
}

// start starts a run of w: the example on the fleet's stream, with short
// batches, checkpoints and leases, and the servers' static credentials.
func (f *fleet) start(w *fleetWorker) {
	f.t.Helper()
	w.runs++
	creds, err := f.env.AWSConfig().Credentials.Retrieve(f.t.Context())
	if err != nil {
		f.t.Fatal(err)
	}
	cmd := exec.Command(f.bin, "-stream", f.stream, "-app", f.app, "-table", f.table,
		"-kinesis-endpoint", f.env.KinesisEndpoint, "-dynamodb-endpoint", f.env.DynamoDBEndpoint,
		"-state", w.state, "-repartition-shards", strconv.Itoa(fleetShards),
		"-batch", batchInterval.String(), "-checkpoint", batchInterval.String(), "-lease-duration", leaseDuration.String())
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TMPDIR=" + os.TempDir(),
		"AWS_REGION=" + localaws.Region, "AWS_ACCESS_KEY_ID=" + creds.AccessKeyID, "AWS_SECRET_ACCESS_KEY=" + creds.SecretAccessKey}
	w.c = launch(w.h, w.runs, filepath.Join(f.dir, fmt.Sprintf("%s-%d.stderr", w.h.tuning.worker, w.runs)), cmd)
}

// running returns the workers' current runs that have not exited (a
// killed one is not restarted yet; one not started has none).
func (f *fleet) running() []*child {
	var cs []*child
	for _, w := range f.workers {
		if w.c == nil {
			continue
		}
		select {
		case <-w.c.exited:
		default:
			cs = append(cs, w.c)
		}
	}
	return cs
}

// put puts n records "kNN,ID" with increasing IDs, each with its ID as
// partition key, and adds them to the truth.
func (f *fleet) put(n int) {
	f.t.Helper()
	data := make([][]byte, n)
	for i := range data {
		id := f.next + i
		key := fmt.Sprintf("k%02d", id%fleetKeys)
		data[i] = fmt.Appendf(nil, "%s,%d", key, id)
		f.truth[key]++
	}
	first := f.next
	f.next += n
	if err := f.env.PutRecords(f.t.Context(), f.stream, data, func(i int) string { return strconv.Itoa(first + i) }); err != nil {
		f.t.Fatalf("put records %d to %d: %v (the truth is unknown)", first, first+n-1, err)
	}
	f.leaseBound = max(f.leaseBound, waitLimit+time.Duration(f.next)*time.Millisecond)
}

// intermediate is the example's intermediate stream, and its lease table.
func (f *fleet) intermediate() (stream, table string) {
	return f.app + "-by-key", f.app + "-by-key.leases"
}

// leasesOf returns the leases of table, none if it does not exist yet.
func (f *fleet) leasesOf(table string) []lease.Lease {
	f.t.Helper()
	return leasesIn(f.t, f.env, table)
}

// leasesIn returns the leases of table on env's DynamoDB, none if it does
// not exist yet.
func leasesIn(t *testing.T, env *localaws.Env, table string) []lease.Lease {
	t.Helper()
	lt, err := lease.NewTable(lease.TableConfig{Name: table, Client: env.DynamoDB()})
	if err != nil {
		t.Fatal(err)
	}
	leases, err := lt.List(t.Context())
	var notYet *ddbtypes.ResourceNotFoundException
	if errors.As(err, &notYet) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return leases
}

// await polls every 100ms until ok holds, failing the test after
// f.leaseBound (a failure guard) or if a worker exits.
func (f *fleet) await(what string, ok func() (bool, string)) {
	f.t.Helper()
	awaitFleet(f.t, what, f.leaseBound, f.running(), f.tails, ok)
}

// awaitFleet polls ok every 100ms until it holds, failing t after limit (a
// failure guard), with the state ok last gave and tails (the workers'
// output), or once one of the workers' children cs exits.
func awaitFleet(t *testing.T, what string, limit time.Duration, cs []*child, tails func() string, ok func() (bool, string)) {
	t.Helper()
	exited, why := anyExited(cs...)
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		done, state := ok()
		if done {
			return
		}
		select {
		case <-tick.C:
		case <-exited:
			t.Fatalf("a worker exited before %s (%s): %s", what, state, why())
		case <-deadline.C:
			t.Fatalf("not %s within %v: %s%s", what, limit, state, tails())
		}
	}
}

// awaitHolders waits until the leases of both streams are all held, by n
// workers (each holding some of each).
func (f *fleet) awaitHolders(n int) {
	f.t.Helper()
	_, mid := f.intermediate()
	f.await(fmt.Sprintf("%d workers holding every lease of both streams", n), func() (bool, string) {
		var state []string
		ok := true
		for _, table := range []string{f.app, mid} {
			owners := map[string]int{}
			for _, l := range f.leasesOf(table) {
				owners[l.Owner]++
			}
			state = append(state, fmt.Sprintf("%s: %v", table, owners))
			ok = ok && owners[""] == 0 && len(owners) == n
		}
		return ok, strings.Join(state, "; ")
	})
}

// victim waits delay (the kill moment, the test's input), then picks, by
// rng, one of the workers holding leases (waiting for one if none does),
// so that the kill moves leases.
func (f *fleet) victim(delay time.Duration, rng *rand.Rand) *fleetWorker {
	f.t.Helper()
	t := time.NewTimer(delay)
	defer t.Stop()
	exited, why := anyExited(f.running()...)
	select {
	case <-t.C:
	case <-exited:
		f.t.Fatalf("a worker exited on its own: %s", why())
	}
	var w *fleetWorker
	f.await("a worker holding leases", func() (bool, string) {
		var holding []*fleetWorker
		for _, w := range f.workers {
			if len(f.heldBy(w.c.cmd.Process.Pid)) > 0 {
				holding = append(holding, w)
			}
		}
		if len(holding) == 0 {
			return false, "no worker holds a lease"
		}
		w = holding[rng.IntN(len(holding))]
		return true, ""
	})
	return w
}

// heldBy returns the leases of either stream that name an owner of the
// process pid (a worker ID holds its pid: "host:pid:hex"), as table/shard.
func (f *fleet) heldBy(pid int) []string {
	f.t.Helper()
	_, mid := f.intermediate()
	mark := ":" + strconv.Itoa(pid) + ":"
	var held []string
	for _, table := range []string{f.app, mid} {
		for _, l := range f.leasesOf(table) {
			if strings.Contains(l.Owner, mark) {
				held = append(held, table+"/"+l.Shard)
			}
		}
	}
	return held
}

// awaitLeasesLeft waits until no lease of either stream names an owner of
// the process pid (killed or stopped).
func (f *fleet) awaitLeasesLeft(pid int) {
	f.t.Helper()
	f.await(fmt.Sprintf("the leases of pid %d taken by others", pid), func() (bool, string) {
		held := f.heldBy(pid)
		return len(held) == 0, fmt.Sprintf("still held: %v", held)
	})
}

// split splits an open shard of the intermediate stream, picked by rng,
// at the middle of its hash key range, once the stream exists, and waits
// until the stream is ACTIVE again.
func (f *fleet) split(rng *rand.Rand) {
	f.t.Helper()
	mid, _ := f.intermediate()
	splitShard(f.t, f.env, mid, rng, nil, f.await)
}

// splitShard splits an open shard of stream name, picked by rng among
// those prefer accepts (any open shard if it accepts none, or is nil), at
// the middle of its hash key range, once the stream exists, waits until
// the stream is ACTIVE again, and returns the shard's ID; await is the
// fleet's wait for a condition.
func splitShard(t *testing.T, env *localaws.Env, name string, rng *rand.Rand, prefer func(shard string) bool,
	await func(what string, ok func() (bool, string))) string {
	t.Helper()
	kc := env.Kinesis()
	var open []types.Shard
	await("stream "+name+" created", func() (bool, string) {
		out, err := kc.ListShards(t.Context(), &awskinesis.ListShardsInput{StreamName: aws.String(name)})
		var notYet *types.ResourceNotFoundException
		if errors.As(err, &notYet) {
			return false, err.Error()
		}
		if err != nil {
			t.Fatal(err)
		}
		open = slices.DeleteFunc(out.Shards, func(s types.Shard) bool { return s.SequenceNumberRange.EndingSequenceNumber != nil })
		return len(open) > 0, "no open shard"
	})
	if prefer != nil {
		if preferred := slices.DeleteFunc(slices.Clone(open), func(s types.Shard) bool { return !prefer(aws.ToString(s.ShardId)) }); len(preferred) > 0 {
			open = preferred
		}
	}
	s := open[rng.IntN(len(open))]
	lo, _ := new(big.Int).SetString(aws.ToString(s.HashKeyRange.StartingHashKey), 10)
	hi, _ := new(big.Int).SetString(aws.ToString(s.HashKeyRange.EndingHashKey), 10)
	middle := new(big.Int).Add(lo, hi)
	middle.Add(middle, big.NewInt(1)).Rsh(middle, 1) // above lo, as Kinesis requires
	if _, err := kc.SplitShard(t.Context(), &awskinesis.SplitShardInput{StreamName: aws.String(name),
		ShardToSplit: s.ShardId, NewStartingHashKey: aws.String(middle.String())}); err != nil {
		t.Fatalf("split %s of %s: %v", aws.ToString(s.ShardId), name, err)
	}
	awaitActive(t, env, name, "the split", await)
	t.Logf("split %s of %s at hash key %s", aws.ToString(s.ShardId), name, middle)
	return aws.ToString(s.ShardId)
}

// mergeChildren merges the two children of shard parent of stream name (a
// split's, both open), and waits until the stream is ACTIVE again; await
// is the fleet's wait for a condition.
func mergeChildren(t *testing.T, env *localaws.Env, name, parent string, await func(what string, ok func() (bool, string))) {
	t.Helper()
	kc := env.Kinesis()
	out, err := kc.ListShards(t.Context(), &awskinesis.ListShardsInput{StreamName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	children := slices.DeleteFunc(out.Shards, func(s types.Shard) bool {
		return aws.ToString(s.ParentShardId) != parent || s.SequenceNumberRange.EndingSequenceNumber != nil
	})
	if len(children) != 2 {
		t.Fatalf("shard %s of %s has %d open children, want 2", parent, name, len(children))
	}
	slices.SortFunc(children, func(a, b types.Shard) int {
		x, _ := new(big.Int).SetString(aws.ToString(a.HashKeyRange.StartingHashKey), 10)
		y, _ := new(big.Int).SetString(aws.ToString(b.HashKeyRange.StartingHashKey), 10)
		return x.Cmp(y)
	})
	if _, err := kc.MergeShards(t.Context(), &awskinesis.MergeShardsInput{StreamName: aws.String(name),
		ShardToMerge: children[0].ShardId, AdjacentShardToMerge: children[1].ShardId}); err != nil {
		t.Fatalf("merge %s and %s of %s: %v", aws.ToString(children[0].ShardId), aws.ToString(children[1].ShardId), name, err)
	}
	awaitActive(t, env, name, "the merge", await)
	t.Logf("merged %s and %s of %s", aws.ToString(children[0].ShardId), aws.ToString(children[1].ShardId), name)
}

// awaitActive waits until stream name is ACTIVE after a reshard (what).
func awaitActive(t *testing.T, env *localaws.Env, name, what string, await func(what string, ok func() (bool, string))) {
	t.Helper()
	await("stream "+name+" ACTIVE after "+what, func() (bool, string) {
		out, err := env.Kinesis().DescribeStreamSummary(t.Context(), &awskinesis.DescribeStreamSummaryInput{StreamName: aws.String(name)})
		if err != nil {
			t.Fatal(err)
		}
		st := out.StreamDescriptionSummary.StreamStatus
		return st == types.StreamStatusActive, string(st)
	})
}

// drained reports whether every shard of stream has a lease in table
// checkpointed at its end (see streamDrained).
func (f *fleet) drained(stream, table string) (bool, string) {
	f.t.Helper()
	return streamDrained(f.t, f.env, stream, table)
}

// streamDrained reports whether every shard of stream (on env) has a lease
// in table checkpointed at its end (SHARD_END, or with no record after the
// checkpoint), or is a closed shard whose lease was deleted once its
// children's had begun (or, after a reshard of its children, whose
// descendant has a lease): the workers reading it with leases then
// completed every batch holding its records. If not, it says which shard
// is not.
func streamDrained(t *testing.T, env *localaws.Env, stream, table string) (bool, string) {
	t.Helper()
	kc := env.Kinesis()
	out, err := kc.ListShards(t.Context(), &awskinesis.ListShardsInput{StreamName: aws.String(stream)})
	var notYet *types.ResourceNotFoundException
	if errors.As(err, &notYet) {
		return false, stream + " not created yet"
	}
	if err != nil {
		t.Fatal(err)
	}
	leases := map[string]lease.Lease{}
	for _, l := range leasesIn(t, env, table) {
		leases[l.Shard] = l
	}
	children := map[string][]string{}
	for _, s := range out.Shards {
		for _, p := range []*string{s.ParentShardId, s.AdjacentParentShardId} {
			if p != nil {
				children[*p] = append(children[*p], aws.ToString(s.ShardId))
			}
		}
	}
	var descendantLeased func(shard string) bool // a closed shard whose child, or its child's, has a lease
	descendantLeased = func(shard string) bool {
		for _, c := range children[shard] {
			if _, ok := leases[c]; ok || descendantLeased(c) {
				return true
			}
		}
		return false
	}
	for _, s := range out.Shards {
		shard := aws.ToString(s.ShardId)
		l, ok := leases[shard]
		switch {
		case !ok && s.SequenceNumberRange.EndingSequenceNumber != nil && descendantLeased(shard):
			continue // finished: its lease was deleted once its children's began
		case !ok:
			return false, fmt.Sprintf("%s/%s has no lease yet", stream, shard)
		}
		in := &awskinesis.GetShardIteratorInput{StreamName: aws.String(stream), ShardId: s.ShardId}
		switch l.Checkpoint {
		case checkpointer.ShardEnd:
			continue
		case checkpointer.TrimHorizon:
			in.ShardIteratorType = types.ShardIteratorTypeTrimHorizon
		default:
			if _, isSeq := new(big.Int).SetString(l.Checkpoint, 10); !isSeq {
				return false, fmt.Sprintf("%s/%s checkpointed at %s", stream, shard, l.Checkpoint)
			}
			in.ShardIteratorType, in.StartingSequenceNumber = types.ShardIteratorTypeAfterSequenceNumber, aws.String(l.Checkpoint)
		}
		it, err := kc.GetShardIterator(t.Context(), in)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := kc.GetRecords(t.Context(), &awskinesis.GetRecordsInput{ShardIterator: it.ShardIterator, Limit: aws.Int32(1)})
		if err != nil {
			t.Fatal(err)
		}
		if len(recs.Records) > 0 {
			return false, fmt.Sprintf("%s/%s has records after its checkpoint %s (owner %q)", stream, shard, l.Checkpoint, l.Owner)
		}
	}
	return true, ""
}

// finish waits until both streams are drained, sends SIGTERM to every
// worker at once, waits for each to exit 0, and checks the count table
// against the truth: every key exactly. It returns the number of keys
// right.
func (f *fleet) finish() int {
	f.t.Helper()
	mid, midTable := f.intermediate()
	f.await("every shard of both streams checkpointed at its end", func() (bool, string) {
		if ok, state := f.drained(f.stream, f.app); !ok {
			return false, state
		}
		return f.drained(mid, midTable)
	})
	cs := make([]*child, len(f.workers))
	for i, w := range f.workers {
		cs[i] = w.c
	}
	termAll(f.t, cs...)
	return f.checkTable()
}

// termAll sends SIGTERM to every child of a fleet at once (so that none
// takes the leases the others hand back) and waits for each to drain and
// exit 0, failing t if one does not.
func termAll(t *testing.T, cs ...*child) {
	t.Helper()
	for _, c := range cs {
		c.alive()
		if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range cs {
		timer := time.NewTimer(waitLimit)
		select {
		case <-c.exited:
		case <-timer.C:
			t.Fatalf("worker %s did not drain within %v after SIGTERM\n%s", c.h.tuning.worker, waitLimit, c.tail())
		}
		timer.Stop()
		if c.err != nil {
			t.Errorf("worker %s exited after SIGTERM with %v, want exit status 0\n%s", c.h.tuning.worker, c.err, c.tail())
		}
	}
}

// checkTable compares the count table with the truth, printing each key
// that differs and the workers' stderr on a mismatch; it returns the
// number of keys right.
func (f *fleet) checkTable() int {
	f.t.Helper()
	got := map[string]int64{}
	for _, item := range scanTable(f.t, f.env.DynamoDB(), f.table) {
		k, _ := item["key"].(*ddbtypes.AttributeValueMemberS)
		c, _ := item["count"].(*ddbtypes.AttributeValueMemberN)
		if k == nil || c == nil {
			f.t.Fatalf("item %v: want a string key and a number count", item)
		}
		n, err := strconv.ParseInt(c.Value, 10, 64)
		if err != nil {
			f.t.Fatalf("key %s: count %q: %v", k.Value, c.Value, err)
		}
		got[k.Value] = n
	}
	keys := slices.Sorted(maps.Keys(f.truth))
	for k := range got {
		if _, ok := f.truth[k]; !ok {
			keys = append(keys, k)
		}
	}
	var diffs []string
	var put, counted int64
	for _, k := range keys {
		put, counted = put+f.truth[k], counted+got[k]
		if got[k] != f.truth[k] {
			diffs = append(diffs, fmt.Sprintf("  %s: expected %d, got %d", k, f.truth[k], got[k]))
		}
	}
	right := len(keys) - len(diffs)
	f.t.Logf("table: %d of %d keys right; %d records counted, %d put", right, len(keys), counted, put)
	if len(diffs) > 0 {
		f.t.Errorf("the count table differs from the records put: %d of %d keys right, %d records counted of %d put:\n%s%s",
			right, len(keys), counted, put, strings.Join(diffs, "\n"), f.tails())
	}
	return right
}

// tails returns the end of each worker's last stderr file.
func (f *fleet) tails() string {
	var sb strings.Builder
	for _, w := range f.workers {
		if w.c != nil {
			fmt.Fprintf(&sb, "\n--- worker %s, run %d, stderr and stdout:\n%s", w.h.tuning.worker, w.runs, w.c.tail())
		}
	}
	return sb.String()
}
