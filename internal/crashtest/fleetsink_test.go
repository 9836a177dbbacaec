//go:build unix

package crashtest

import (
	"context"
	"fmt"
	"log/slog"
	"math/big"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/checkpointer"
	"github.com/weirstream/weir/internal/localaws"
	"github.com/weirstream/weir/internal/origin"
	kinesissink "github.com/weirstream/weir/sink/kinesis"
	"github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/stream"
)

// Defaults of TestFleetKinesisSinkTorture (and of
// TestFleetDynamoSinkTorture), sized for CI: each event waits for the
// victim's leases to move (a lease duration, 3 s, and a take).
const (
	// fleetSinkKills is the default of WEIR_TORTURE_KILLS for them.
	fleetSinkKills = 2
	// fleetSinkPauses is the default of WEIR_FLEET_PAUSES for them.
	fleetSinkPauses = 1
	// fleetSinkTargetShards is the target stream's shard count: not the
	// source's, so that a source shard's records spread over target shards.
	fleetSinkTargetShards = 3
)

// TestFleetKinesisSinkTorture is the fleet torture test of sink/kinesis
// with origins (DESIGN.md, "Tag v2: origins, for a fleet"): 3 worker
// processes (the crash test's child pipeline, each with its own worker ID,
// recovery log and output file) share a 4-shard source stream through the
// lease table and copy every record to a 3-shard target stream with
// ForEachBatch(recs, sink.Write, stream.Origins()), some of the sink's
// records failing on purpose (putMarkClient), while a producer keeps
// putting records. WEIR_TORTURE_KILLS times (default 2) a worker holding
// leases is killed with SIGKILL and restarted with its log once the others
// hold every lease it held; WEIR_FLEET_PAUSES times (default 1) one is
// stopped with SIGSTOP until the others hold its leases, then let go on
// with SIGCONT (a zombie with batches in flight). The events come in an
// order drawn from the seed; every other one lands inside a batch's sink
// output (awaitInSink), the others at random moments. Then the producer
// stops, the fleet checkpoints every source shard at its end, and every
// worker gets SIGTERM and must drain and exit 0.
//
// The check is the documented promise: the target stream read by a
// pipeline through kinesissink.Deduplicate yields every record of the
// source stream exactly once, each partition key's (a source shard's key)
// in source order. The output files must hold every record (G1), and no
// checkpoint may pass its worker's completed records or be written by a
// worker that lost its lease.
func TestFleetKinesisSinkTorture(t *testing.T) {
	kills, pauses, seed, rng := sinkFleetSchedule(t)
	start := time.Now()
	env := servers.Env(t)
	h := newHarness(t, env, fleetShards)
	h.kinesisSink, h.kinesisSinkOrigins = h.stream+"-out", true
	ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
	defer cancel()
	if err := env.CreateStream(ctx, h.kinesisSink, fleetSinkTargetShards); err != nil {
		t.Fatal(err)
	}
	f, inSink := newSinkFleet(h, "sink-w").runOnSource(kills, pauses, rng)
	// want is every record of the source stream, per target key, in
	// source order.
	want := map[string][]int64{}
	source := 0
	for shard, recs := range readStream(t, env.Kinesis(), h.stream) {
		for _, r := range recs {
			id, err := strconv.ParseInt(string(r.Data), 10, 64)
			if err != nil {
				t.Fatalf("source record %q: %v", r.Data, err)
			}
			want[targetKey(shard, id)] = append(want[targetKey(shard, id)], id)
			source++
		}
	}
	raw := 0
	for shard, recs := range readStream(t, env.Kinesis(), h.kinesisSink) {
		for _, r := range recs {
			raw++
			if tag, _, ok, err := origin.Decode(r.Data); err != nil || !ok || tag.Seq == "" {
				t.Fatalf("target shard %s, record %s: want a version 2 origin tag, got %+v (tagged %v, %v)", shard, aws.ToString(r.SequenceNumber), tag, ok, err)
			}
		}
	}
	got, kept := readDeduplicated(t, env, h.kinesisSink, raw)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("target stream through Deduplicate, records per partition key in stream order (-want source order +got):\n%s", diff)
		reportOnce(t, want, got)
	}
	report(t, fmt.Sprintf("fleet Kinesis sink torture: %d workers, %d kills, %d pauses (%d inside the sink's output), 1 split of the source, seed %d: %v; source %d records, target %d, %d through Deduplicate (%d copies dropped); took %v",
		fleetWorkers, kills, pauses, inSink, seed, f, source, raw, kept, raw-kept, time.Since(start).Round(time.Millisecond)))
}

// sinkFleetSchedule returns the events of a sink's fleet torture: its
// kills (WEIR_TORTURE_KILLS, default fleetSinkKills) and pauses
// (WEIR_FLEET_PAUSES, default fleetSinkPauses), and the seed of their
// order and moments and a generator from it (see tortureSeed).
func sinkFleetSchedule(t *testing.T) (kills, pauses int, seed uint64, rng *rand.Rand) {
	t.Helper()
	kills, seed, rng = tortureScheduleOf(t, fleetSinkKills)
	return kills, envInt(t, "WEIR_FLEET_PAUSES", fleetSinkPauses), seed, rng
}

// sinkFleet is the fleet of the fleet torture tests of the sinks and of
// Deduplicate: members (one harness per worker: its ID, log and output)
// and their current children.
type sinkFleet struct {
	h       *harness // the stream, lease table and servers
	members []*harness
	cs      []*child
	// merge makes torture merge the split's children again, before its
	// last event (with pauseAcrossSplit, during the pause).
	merge bool
	// pauseAcrossSplit makes torture's first pause, if it has one, the
	// moment of the split: the victim, stopped inside a batch's sink
	// output, is let go on only once a shard it held was split and the
	// others completed batches of both children (see splitDuringPause), a
	// zombie whose batch in flight then writes records of a parent after
	// its children's. With merge, the pause is torture's first event, and
	// the victim is killed instead of let go on, the children merged, and
	// the victim restarted once the others completed batches of the merged
	// shard (see mergeWhileDead): its recovery runs its batches of the
	// parent again after the merged shard's writes, a grandparent's after
	// a grandchild's.
	pauseAcrossSplit bool
}

// newSinkFleet returns a fleet of fleetWorkers members of h, the workers
// prefix1, prefix2..., none started.
func newSinkFleet(h *harness, prefix string) *sinkFleet {
	fl := &sinkFleet{h: h}
	for i := range fleetWorkers {
		fl.members = append(fl.members, h.member(fmt.Sprintf("%s%d", prefix, i+1)))
	}
	return fl
}

// runOnSource runs the fleet on its stream, the source, while a producer
// puts records: it starts every member, tortures them (see torture), stops
// the producer, waits until every source shard is checkpointed at its
// end, stops every worker with SIGTERM (each must drain and exit 0), and
// checks their outputs (every record at least once), recovery logs and
// checkpoint journals. It returns the outputs' figures, their re-run
// batches counted per worker (see rerun), and the number of events inside
// a batch's sink output.
func (fl *sinkFleet) runOnSource(kills, pauses int, rng *rand.Rand) (f figures, inSink int) {
	h, t := fl.h, fl.h.t
	t.Helper()
	prod, stopProducer := startProducer(t, h)
	defer stopProducer()
	for _, m := range fl.members {
		fl.cs = append(fl.cs, m.start())
	}

	inSink = fl.torture(kills, pauses, rng)
	stopProducer()
	put, maybe, _ := prod.snapshot()
	awaitFleet(t, "every source shard checkpointed at its end", waitLimit, fl.cs, fl.tails, func() (bool, string) {
		return streamDrained(t, h.env, h.stream, h.table)
	})
	termAll(t, fl.cs...)

	f = checkAtLeastOnceIn(t, put, maybe, fl.members...)
	for _, m := range fl.members {
		m.checkLog()
		m.checkJournalOf(false) // a worker may lose its leases before its first checkpoint
	}
	f.Rerun = fl.rerun() // checkAtLeastOnce counts none: batch times are not one worker's
	return f, inSink
}

// torture kills (and restarts) kills times, and pauses pauses times, a
// worker holding leases, in an order drawn by rng, each time waiting
// until the others hold every lease it held; it splits a shard of the
// fleet's stream midway (or at once, without events; or, with
// fl.pauseAcrossSplit, during the first pause) and, with fl.merge, merges
// its children before the last event (or after it, or at once; with both,
// the pause is the first event, and the merge is made while its victim is
// dead: see pauseAcrossSplit). Every
// other event (and a pause across the split) lands inside a batch's later
// outputs (awaitInSink), the others at random moments. It returns the
// number of the former.
func (fl *sinkFleet) torture(kills, pauses int, rng *rand.Rand) (inSink int) {
	t := fl.h.t
	t.Helper()
	events := slices.Repeat([]string{"kill"}, kills)
	events = append(events, slices.Repeat([]string{"pause"}, pauses)...)
	rng.Shuffle(len(events), func(i, j int) { events[i], events[j] = events[j], events[i] })
	splitAt, mergeAt := len(events)/2, len(events)-1
	pauseSplit := fl.pauseAcrossSplit && slices.Contains(events, "pause")
	if pauseSplit && fl.merge {
		// The split and the merge first, so that every other event
		// comes after both reshards.
		p := slices.Index(events, "pause")
		events[0], events[p] = events[p], events[0]
	}
	if pauseSplit {
		splitAt = slices.Index(events, "pause")
	}
	split, merged := "", false
	for i, event := range events {
		across := pauseSplit && i == splitAt
		if i == splitAt && !across {
			split = fl.split(rng)
		}
		if i == mergeAt && fl.merge && split != "" && !merged {
			fl.mergeChildren(split)
			merged = true
		}
		w, held := fl.victim(rng)
		m, c := fl.members[w], fl.cs[w]
		moment := "at random"
		if i%2 == 0 || across {
			m.awaitInSink(c)
			moment, inSink = "inside the sink's output", inSink+1
		} else {
			c.after(minKillDelay + time.Duration(rng.Int64N(int64(maxKillDelay-minKillDelay))))
		}
		switch event {
		case "kill":
			c.kill(0)
			fl.awaitLeasesLeft(w)
			fl.cs[w] = m.start()
		case "pause":
			if err := c.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			if across {
				split = fl.splitDuringPause(w, rng)
				moment += ", across the split of " + split
				if fl.merge {
					c.kill(0)
					fl.mergeWhileDead(w, split)
					merged = true
					fl.cs[w] = m.start()
					moment += ", killed and restarted after the merge of its children"
					break
				}
			} else {
				fl.awaitLeasesLeft(w)
			}
			if err := c.cmd.Process.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("%s %d: worker %s (pid %d) holding %d leases, %s; its leases taken by the others", event, i+1, m.tuning.worker, c.cmd.Process.Pid, held, moment)
	}
	if split == "" {
		split = fl.split(rng)
	}
	if fl.merge && !merged {
		fl.mergeChildren(split)
	}
	return inSink
}

// splitDuringPause splits a shard that worker w, stopped, holds (any
// open shard if it holds none now), and waits until the others hold every
// lease w held and have checkpointed both of the split's children past
// their start: they completed batches of the children's records after
// every record of the parent, so the writes w's batch in flight still
// makes of the parent's records come after the children's. It returns
// the split shard's ID.
func (fl *sinkFleet) splitDuringPause(w int, rng *rand.Rand) string {
	h := fl.h
	h.t.Helper()
	worker := fl.members[w].tuning.worker
	leases, err := h.leases()
	if err != nil {
		h.t.Fatal(err)
	}
	held := map[string]bool{}
	for _, l := range leases {
		held[l.Shard] = l.Owner == worker
	}
	split := splitShard(h.t, h.env, h.stream, rng, func(shard string) bool { return held[shard] }, fl.await)
	fl.awaitLeasesLeft(w)
	fl.awaitBegun(fl.await, fmt.Sprintf("both children of %s", split), func(s types.Shard) bool { return aws.ToString(s.ParentShardId) == split })
	return split
}

// mergeWhileDead merges the children of the split shard parent while the
// worker that held parent is dead, and waits until the others have
// checkpointed the merged shard past its start: they completed batches of
// its records after every record of both children, so that the writes the
// dead worker's recovery runs again of parent's records, once it is
// restarted, come after the merged shard's: a grandparent's after its
// grandchild's.
func (fl *sinkFleet) mergeWhileDead(w int, parent string) {
	fl.h.t.Helper()
	others := slices.Delete(slices.Clone(fl.cs), w, w+1)
	await := func(what string, ok func() (bool, string)) {
		fl.h.t.Helper()
		awaitFleet(fl.h.t, what, waitLimit, others, fl.tails, ok)
	}
	out, err := fl.h.env.Kinesis().ListShards(fl.h.t.Context(), &awskinesis.ListShardsInput{StreamName: aws.String(fl.h.stream)})
	if err != nil {
		fl.h.t.Fatal(err)
	}
	children := map[string]bool{}
	for _, s := range out.Shards {
		if aws.ToString(s.ParentShardId) == parent {
			children[aws.ToString(s.ShardId)] = true
		}
	}
	mergeChildren(fl.h.t, fl.h.env, fl.h.stream, parent, await)
	fl.awaitBegun(await, fmt.Sprintf("the merge of the children of %s", parent), func(s types.Shard) bool { return children[aws.ToString(s.ParentShardId)] })
}

// awaitBegun waits, with await (the fleet's wait, or one watching some of
// its workers), until every shard of the fleet's stream that isChild
// picks has a lease checkpointed past its start (a sequence number or
// SHARD_END): a worker completed a batch of its records. what names them.
func (fl *sinkFleet) awaitBegun(await func(string, func() (bool, string)), what string, isChild func(types.Shard) bool) {
	h := fl.h
	h.t.Helper()
	await(what+" checkpointed past their start", func() (bool, string) {
		out, err := h.env.Kinesis().ListShards(h.t.Context(), &awskinesis.ListShardsInput{StreamName: aws.String(h.stream)})
		if err != nil {
			h.t.Fatal(err)
		}
		leases, err := h.leases()
		if err != nil {
			h.t.Fatal(err)
		}
		at := map[string]string{}
		for _, l := range leases {
			at[l.Shard] = l.Checkpoint
		}
		var state []string
		for _, s := range out.Shards {
			if !isChild(s) {
				continue
			}
			cp := at[aws.ToString(s.ShardId)]
			if _, isSeq := new(big.Int).SetString(cp, 10); !isSeq && cp != checkpointer.ShardEnd {
				state = append(state, fmt.Sprintf("%s at %q", aws.ToString(s.ShardId), cp))
			}
		}
		return len(state) == 0, "shards " + strings.Join(state, ", ")
	})
}

// victim returns the index of a worker picked by rng among those holding
// leases (waiting for one if none does), and the number it holds.
func (fl *sinkFleet) victim(rng *rand.Rand) (int, int) {
	fl.h.t.Helper()
	var owners map[string]int
	fl.h.awaitOwners("a worker holding leases", waitLimit, func(o map[string]int) bool {
		owners = o
		for _, m := range fl.members {
			if o[m.tuning.worker] > 0 {
				return true
			}
		}
		return false
	}, fl.cs...)
	var holding []int
	for i, m := range fl.members {
		if owners[m.tuning.worker] > 0 {
			holding = append(holding, i)
		}
	}
	w := holding[rng.IntN(len(holding))]
	return w, owners[fl.members[w].tuning.worker]
}

// awaitLeasesLeft waits until worker w (killed or stopped) holds no lease:
// the others took every lease it held. It watches the other workers'
// children only.
func (fl *sinkFleet) awaitLeasesLeft(w int) {
	fl.h.t.Helper()
	others := slices.Delete(slices.Clone(fl.cs), w, w+1)
	worker := fl.members[w].tuning.worker
	fl.h.awaitOwners(fmt.Sprintf("the leases of %s taken by the others", worker), waitLimit,
		func(o map[string]int) bool { return o[worker] == 0 }, others...)
}

// split splits a shard of the fleet's stream (see splitShard) while the
// fleet reads it, and returns the shard's ID.
func (fl *sinkFleet) split(rng *rand.Rand) string {
	fl.h.t.Helper()
	return splitShard(fl.h.t, fl.h.env, fl.h.stream, rng, nil, fl.await)
}

// mergeChildren merges the two children of the split shard parent of the
// fleet's stream (see mergeChildren) while the fleet reads it.
func (fl *sinkFleet) mergeChildren(parent string) {
	fl.h.t.Helper()
	mergeChildren(fl.h.t, fl.h.env, fl.h.stream, parent, fl.await)
}

// await waits for a condition as awaitFleet does, watching the fleet.
func (fl *sinkFleet) await(what string, ok func() (bool, string)) {
	fl.h.t.Helper()
	awaitFleet(fl.h.t, what, waitLimit, fl.cs, fl.tails, ok)
}

// rerun returns the number of batches a worker ran again after a restart:
// batch times of one worker's output file begun by two of its processes.
func (fl *sinkFleet) rerun() int {
	fl.h.t.Helper()
	n := 0
	for _, m := range fl.members {
		data, err := os.ReadFile(m.out)
		if err != nil {
			fl.h.t.Fatal(err)
		}
		tr, err := parseOutput(string(data))
		if err != nil {
			fl.h.t.Fatalf("output of %s: %v", m.tuning.worker, err)
		}
		procs := map[int64]map[int]bool{}
		for _, r := range tr.runs {
			if procs[r.time] == nil {
				procs[r.time] = map[int]bool{}
			}
			procs[r.time][r.proc] = true
		}
		for _, ps := range procs {
			if len(ps) > 1 {
				n++
			}
		}
	}
	return n
}

// tails returns the end of each worker's current child's stderr.
func (fl *sinkFleet) tails() string {
	var sb strings.Builder
	for _, c := range fl.cs {
		fmt.Fprintf(&sb, "\n--- worker %s, child %d:\n%s", c.h.tuning.worker, c.n, c.tail())
	}
	return sb.String()
}

// awaitInSink polls c's output file, often, until c is inside the sink
// output of a batch holding records: the crash file's output of the batch
// (declared first) ended and its done line, written once the driver logged
// the batch's completion after the later outputs, has not come yet. A kill
// or a stop right after it lands, most often, inside the batch's
// PutRecords calls or between them and its completion.
func (h *harness) awaitInSink(c *child) {
	h.t.Helper()
	h.awaitOwn(c, "an end line of a batch with records and no done line", 2*time.Millisecond, func(mine string) bool {
		end := strings.LastIndex(mine, "\n"+lineEnd+" ")
		if end < 0 {
			return false
		}
		begin := strings.LastIndex(mine[:end], "\n"+lineBegin+" ")
		tm, _, _ := strings.Cut(mine[end+len("\n"+lineEnd+" "):], "\n")
		return begin >= 0 && strings.Contains(mine[begin:end], "\n"+lineRec+" ") &&
			!strings.Contains(mine[end:], "\n"+lineDone+" "+tm+"\n")
	})
}

// readDeduplicated reads the whole stream name (raw records) with a
// pipeline through kinesissink.Deduplicate, the documented reader of a
// stream written with origin tags, and returns the IDs it yields per
// partition key, in stream order, and their number.
func readDeduplicated(t *testing.T, env *localaws.Env, name string, raw int) (map[string][]int64, int) {
	t.Helper()
	awsCfg := env.AWSConfig()
	recv, err := kinesis.New(kinesis.Config{Stream: name, App: "crashtest-reader", InitialPosition: kinesis.TrimHorizon,
		AWS: &awsCfg, Endpoint: env.KinesisEndpoint, PollInterval: pollInterval})
	if err != nil {
		t.Fatal(err)
	}
	// Warnings only (the driver hands its logger to the receiver): the
	// reader's start and drain are no news.
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	p, err := stream.NewPipeline(stream.Config{BatchInterval: batchInterval, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	in := stream.From(p, recv)
	var mu sync.Mutex // the outputs run on the driver's goroutines; the test reads after Run
	got, kept := map[string][]int64{}, 0
	stream.ForEachBatch(kinesissink.Deduplicate(in), func(_ context.Context, b *batch.Batch[kinesis.Record]) error {
		mu.Lock()
		defer mu.Unlock()
		for r := range b.All() {
			id, err := strconv.ParseInt(string(r.Data), 10, 64)
			if err != nil {
				return fmt.Errorf("record %s of shard %s out of Deduplicate: %q: %w", r.SequenceNumber, r.ShardID, r.Data, err)
			}
			got[r.PartitionKey] = append(got[r.PartitionKey], id)
			kept++
		}
		return nil
	})
	read := 0 // declared after Deduplicate's output: runs after it, on the same batch
	stream.ForEachBatch(in, func(ctx context.Context, b *batch.Batch[kinesis.Record]) error {
		if read += b.Len(); read >= raw {
			return p.Drain(ctx)
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
	defer cancel()
	if err := p.Run(ctx); err != nil {
		t.Fatalf("reading %s through Deduplicate (%d of %d records read): %v", name, read, raw, err)
	}
	if read < raw {
		t.Fatalf("reading %s through Deduplicate: %d of %d records read", name, read, raw)
	}
	mu.Lock()
	defer mu.Unlock()
	return got, kept
}

// reportOnce logs the records missing from got and those in it more than
// once, with their counts, against want (each once): the failure's
// evidence in a few lines.
func reportOnce(t *testing.T, want, got map[string][]int64) {
	t.Helper()
	n := map[int64]int{}
	for _, ids := range got {
		for _, id := range ids {
			n[id]++
		}
	}
	var missing, twice []int64
	for _, ids := range want {
		for _, id := range ids {
			switch {
			case n[id] == 0:
				missing = append(missing, id)
			case n[id] > 1:
				twice = append(twice, id)
			}
		}
	}
	slices.Sort(missing)
	slices.Sort(twice)
	counts := make([]string, len(twice))
	for i, id := range twice {
		counts[i] = fmt.Sprintf("%d (x%d)", id, n[id])
	}
	t.Errorf("%d records missing: %v; %d more than once: %v", len(missing), missing, len(twice), counts)
}
