package kinesis_test

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/source/kinesis"
)

// msgCount counts the log records of each message passed through a
// hookHandler (see count).
type msgCount struct {
	mu sync.Mutex
	n  map[string]int
}

// count is a hookHandler's on for c.
func (c *msgCount) count(r slog.Record) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[r.Message]++
}

// of returns the number of records of message msg.
func (c *msgCount) of(msg string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[msg]
}

// steal names owner the owner of shard's lease, as a worker stealing it
// towards balance does, and returns the lease's new counter. Its notice to
// the holder goes on the lease's own item, which must be the beat board
// (the smallest leaseKey: the tests' only shard, or the parent of a
// split). owner never beats: the holder learns of the steal at its next
// beat and takes the lease back once it expires.
func (f *countFleet) steal(shard, owner string) int64 {
	f.t.Helper()
	l := f.leases()[shard]
	counter := l.Counter + 1000
	if _, err := f.env.DynamoDB().UpdateItem(f.t.Context(), &awsdynamodb.UpdateItemInput{
		TableName:                aws.String(f.table),
		Key:                      map[string]ddbtypes.AttributeValue{"leaseKey": &ddbtypes.AttributeValueMemberS{Value: shard}},
		UpdateExpression:         aws.String("SET leaseOwner = :owner, leaseCounter = :c ADD #notice :n"),
		ExpressionAttributeNames: map[string]string{"#notice": "weirStolen:" + l.Owner},
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{
			":owner": &ddbtypes.AttributeValueMemberS{Value: owner},
			":c":     &ddbtypes.AttributeValueMemberN{Value: strconv.FormatInt(counter, 10)},
			":n":     &ddbtypes.AttributeValueMemberSS{Value: []string{shard + " " + strconv.FormatInt(counter, 10)}},
		},
	}); err != nil {
		f.t.Fatal(err)
	}
	return counter
}

// stepBatches puts the pipelines of the workers started after it on a
// clock that stands still, so that the records their receivers read wait
// in an open block, and returns a wrapper of a condition of f.waitFor
// that lets the pipelines run a batch interval each time it checks it. A
// wall-clock ticker wakes f.waitFor meanwhile, as the batches do in the
// other tests.
func (f *countFleet) stepBatches() func(cond func() bool) func() bool {
	pipe := clock.NewManual(time.Now())
	f.pipeClock = pipe
	ctx, stop := context.WithCancel(f.t.Context())
	var wg sync.WaitGroup
	f.t.Cleanup(func() {
		stop()
		wg.Wait()
	})
	wg.Go(func() {
		tk := time.NewTicker(10 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
				select {
				case f.tick <- struct{}{}:
				default:
				}
			}
		}
	})
	return func(cond func() bool) func() bool {
		return func() bool {
			pipe.Advance(100 * time.Millisecond)
			return cond()
		}
	}
}

// readAgain waits, on a fleet of one worker "a" whose one shard's round 1
// was put, for a to count and complete round 1; then thief steals the
// lease, and readAgain waits for a to take it back and read round 1 again
// from TRIM_HORIZON (f.checkpoint long), its records held in the open block
// by the batches' clock (stepBatches). logs counts the fleet's log
// messages. It returns the shard, a's receiver and how many records a read
// of the shard.
func (f *countFleet) readAgain(batches func(func() bool) func() bool, logs *msgCount, thief string) (shard string, ra *kinesis.Receiver, read func() int64) {
	f.t.Helper()
	const reading = "kinesis: reading leased shard"
	f.waitFor("a counts round 1", batches(func() bool { return len(f.wrong()) == 0 }))
	for s := range f.leases() {
		shard = s
	}
	ra = f.receiver("a")
	read = func() int64 { return ra.Stats().Shards[shard].RecordsRead }
	f.waitFor("a completes round 1", batches(func() bool {
		st := ra.Stats().Shards[shard]
		return st.LatestCompleted != "" && st.LatestCompleted == st.LastAdded
	}))
	f.steal(shard, thief)
	perRound := int64(f.keys * f.perRound)
	f.waitFor("a takes the lease back and reads round 1 again", func() bool {
		return logs.of(reading) == 2 && read() == 2*perRound
	})
	return shard, ra, read
}

// A worker that loses a lease twice, the second time while the records it
// read again under the first retake are still on their way through its
// pipeline, loads the shard's state at its second retake only once those
// records are completed. Its state per shard counts them only while it is
// loaded, and the reader of the new hold reads them again from the last
// snapshot (none here), so a load before them would count them twice.
//
// The pipeline's clock stands still while the leases move, so the records
// read again wait in an open block until the test lets the batches go.
// Before, the wait compared the greatest sequence numbers added to blocks
// and completed, kept over every hold: the first hold's completions, as
// great as the records read again, made the shard look settled at once.
func TestLeasesStatePerShardRetakenWithRecordsPending(t *testing.T) {
	t.Parallel()
	f := newCountFleet(t, 1)
	f.checkpoint = time.Hour // no snapshot: every hold reads from TRIM_HORIZON
	batches := f.stepBatches()
	logs := &msgCount{n: map[string]int{}}
	f.logger = slog.New(hookHandler{testLogger().Handler(), logs.count})
	const waits = "kinesis: a newly leased shard waits for the records of its earlier hold or of its parents to complete before loading its state"

	perRound := int64(f.keys * f.perRound)
	f.put()
	a, aDone := f.worker("a")
	defer func() {
		a.Stop()
		<-aDone
	}()
	shard, ra, read := f.readAgain(batches, logs, "thief-1")

	// Third hold, while the second hold's records are not completed.
	stolen := f.steal(shard, "thief-2")
	f.waitFor("a takes the lease back again and reads round 1 a third time, or waits for the second hold's records", func() bool {
		l := f.leases()[shard]
		return l.Owner == "a" && l.Counter > stolen && (read() == 3*perRound || logs.of(waits) > 0)
	})
	t.Logf("at the third take: read %d records (%d a hold), waits logged %d times", read(), perRound, logs.of(waits))

	f.put()
	f.waitFor("a completes everything it read of rounds 1-2", batches(func() bool {
		st := ra.Stats().Shards[shard]
		return st.RecordsRead == 4*perRound && st.LatestCompleted == st.LastAdded
	}))
	if bad := f.wrong(); len(bad) > 0 {
		t.Errorf("counts %v, want %d each: the second hold's records were counted on the state the third hold loaded, "+
			"which read them again", bad, f.perRound*f.round)
	}
}

// A worker that takes back the lease of a shard a split closed, and reads
// it again to its end from the last snapshot (none here), marks it
// SHARD_END only once the records it read again are completed, so that
// their count is in the last snapshot, which the children load. Before,
// the shard's end waited for the greatest sequence number stored to be
// completed, which the earlier hold's completions covered already: the
// last snapshot was taken before the records read again were counted, and
// the children started without them.
func TestLeasesStatePerShardRetakenParentEndsAfterRecordsReadAgain(t *testing.T) {
	t.Parallel()
	f := newCountFleet(t, 1)
	f.checkpoint = time.Hour // no snapshot before the last one
	batches := f.stepBatches()
	parent := aws.ToString(f.shards()[0].ShardId)
	var endMu sync.Mutex
	ends := map[bool]int{} // judgements of the parent's end, by readiness
	f.endCheck = func(shard string, ready bool) {
		endMu.Lock()
		defer endMu.Unlock()
		if shard == parent {
			ends[ready]++
		}
	}
	judged := func() int {
		endMu.Lock()
		defer endMu.Unlock()
		return ends[true] + ends[false]
	}

	perRound := int64(f.keys * f.perRound)
	f.put()
	a, aDone := f.worker("a")
	defer func() {
		a.Stop()
		<-aDone
	}()
	f.waitFor("a counts round 1", batches(func() bool { return len(f.wrong()) == 0 }))
	ra := f.receiver("a")
	f.waitFor("a completes round 1", batches(func() bool {
		st := ra.Stats().Shards[parent]
		return st.LatestCompleted != "" && st.LatestCompleted == st.LastAdded
	}))

	// a loses the lease, the shard is split, and a takes the lease back
	// and reads round 1 again to the parent's end; the records stay in the
	// open block.
	stolen := f.steal(parent, "thief")
	f.waitFor("a loses the parent's lease", func() bool { return !ra.Stats().Shards[parent].Reading })
	f.split()
	f.waitFor("a takes the parent's lease back and reads it again to its end", func() bool {
		l := f.leases()[parent]
		st := ra.Stats().Shards[parent]
		return l.Owner == "a" && l.Counter > stolen && st.RecordsRead == 2*perRound && st.Ended && judged() > 0
	})
	endMu.Lock()
	t.Logf("the parent's end, judged with the records read again in the open block: ready %d times, waiting %d times", ends[true], ends[false])
	endMu.Unlock()

	f.put()
	f.waitFor("a completes the parent and the children's round 2", batches(func() bool {
		if f.leases()[parent].Checkpoint != "SHARD_END" {
			return false
		}
		var read int64
		stats := ra.Stats().Shards
		for s, st := range stats {
			if st.LatestCompleted != st.LastAdded {
				return false
			}
			if s != parent {
				read += st.RecordsRead
			}
		}
		return read == perRound
	}))
	if bad := f.wrong(); len(bad) > 0 {
		t.Errorf("counts %v, want %d each: the parent's last snapshot left out the records its last hold read again", bad, f.perRound*f.round)
	}
}

// A worker that drains while records it read again under a later hold of
// a shard's lease (from a snapshot behind what an earlier hold completed)
// are still on their way through its pipeline waits for them before the
// shard's last snapshot, its last checkpoint and the hand-back, as it does
// for any record it stored: handed back before them, the next owner reads
// them again while this worker's outputs still get them, the same records
// delivered by two workers after a graceful stop.
//
// The pipeline's clock stands still during the drain's wait, so the
// records read again cannot complete: a drain that waits for them gives
// up after a lease duration with its warning, before the hand-back. Before,
// the wait compared the greatest sequence numbers stored and completed,
// which the earlier hold's completions covered: it ended at once and the
// lease was handed back without the warning.
func TestLeasesStatePerShardDrainWaitsForRecordsReadAgain(t *testing.T) {
	t.Parallel()
	f := newCountFleet(t, 1)
	f.checkpoint = time.Hour // no snapshot: every hold reads from TRIM_HORIZON
	batches := f.stepBatches()
	const (
		shortOf    = "kinesis: stored records not completed within the lease duration; the last checkpoints stop short of them"
		handedBack = "kinesis: leases handed back after the final checkpoints"
	)
	logs := &msgCount{n: map[string]int{}}
	var orderMu sync.Mutex
	var order []string // shortOf and handedBack, as logged
	f.logger = slog.New(hookHandler{testLogger().Handler(), func(r slog.Record) {
		logs.count(r)
		if r.Message == shortOf || r.Message == handedBack {
			orderMu.Lock()
			order = append(order, r.Message)
			orderMu.Unlock()
		}
	}})

	f.put()
	a, aDone := f.worker("a")
	f.readAgain(batches, logs, "thief")

	drained := make(chan error, 1)
	go func() { drained <- a.Drain(t.Context()) }()
	f.waitFor("a hands its lease back", func() bool { return logs.of(handedBack) > 0 })
	orderMu.Lock()
	if len(order) == 0 || order[0] != shortOf {
		t.Errorf("a's drain logged %q: it handed the lease back without waiting for the records it read again, "+
			"whose batch could not complete (want the wait's warning first)", order)
	}
	orderMu.Unlock()

	f.waitFor("a's drain ends", batches(func() bool {
		select {
		case err := <-drained:
			if err != nil {
				t.Errorf("Drain: %v", err)
			}
			return true
		default:
			return false
		}
	}))
	if err := <-aDone; err != nil {
		t.Errorf("Run: %v", err)
	}
	if bad := f.wrong(); len(bad) > 0 {
		t.Errorf("counts %v, want %d each", bad, f.perRound*f.round)
	}
}
