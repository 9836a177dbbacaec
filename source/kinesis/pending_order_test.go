package kinesis

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/source"
)

// TestPendingCompletedBeforeAdded: a range whose block completes before
// progress.added notes it (deliver calls added once gen.AddIf returned, and
// the block may be sealed, pushed, batched and completed in between) must
// not stay pending: deliver counts it pending before AddIf (adding).
func TestPendingCompletedBeforeAdded(t *testing.T) {
	p := newProgress()
	r := rng("a", "1", "5", 5)
	p.adding(r.Shard)
	p.completed([]batch.SeqRange{r}) // the driver was quicker than deliver
	p.added(r)
	if !p.allCompleted("a") {
		st := p.shards["a"]
		t.Errorf("the only range added is completed, yet allCompleted = false (pending %d, completed %q, lastAdded %q)",
			st.pending, st.completed, st.lastAdded)
	}
}

// pauseHandler runs hook, once, when the deliver goroutine logs the
// malformed-aggregate WARN: the point between gen.AddIf and
// progress.added, where a scheduler may as well pause the reader.
type pauseHandler struct {
	once *sync.Once
	hook func()
}

// Enabled implements slog.Handler.
func (h pauseHandler) Enabled(context.Context, slog.Level) bool { return true }

// WithAttrs implements slog.Handler.
func (h pauseHandler) WithAttrs([]slog.Attr) slog.Handler { return h }

// WithGroup implements slog.Handler.
func (h pauseHandler) WithGroup(string) slog.Handler { return h }

// Handle implements slog.Handler.
func (h pauseHandler) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "look like KPL aggregates") {
		h.once.Do(h.hook)
	}
	return nil
}

// TestReceiverBlockCompletedBeforeAdded is TestPendingCompletedBeforeAdded
// end to end on kinesalite: the reader is paused after AddIf returned
// (here in a logger call the code makes there; in production, any
// preemption), the block is sealed and pushed, and the driver reports it
// completed before progress.added runs. The shard's only range must not
// stay pending: allCompleted gates SHARD_END (finishEnded), hand-offs and
// settling a retaken shard. It stayed pending for good when deliver
// counted it in added (found by a review).
func TestReceiverBlockCompletedBeforeAdded(t *testing.T) {
	env := servers.Env(t)
	stream := newStream(t, env, 1)
	data := [][]byte{[]byte("\xF3\x89\x9A\xC2 not an aggregate")}
	if err := env.PutRecords(t.Context(), stream, data, nil); err != nil {
		t.Fatal(err)
	}
	var rcv *Receiver
	c := newCollector(1)
	cfg := baseConfig(env, stream)
	cfg.Logger = slog.New(pauseHandler{once: new(sync.Once), hook: func() {
		// The records are in the open block; progress.added has not run.
		select {
		case <-c.full:
		case <-time.After(waitLimit):
			t.Error("the block was not pushed")
			return
		}
		BlocksCompleted(rcv, []batch.BlockInfo{c.snapshot()[0].info})
	}})
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rcv = r
	errc := make(chan error, 1)
	rt := source.Runtime[Record]{Push: c.push, BlockInterval: 5 * time.Millisecond, ReportError: c.reportError}
	go func() { errc <- r.Start(context.Background(), rt) }()
	run := &running{r: r, c: c, errc: errc}
	t.Cleanup(func() { run.stop(t) })
	run.wait(t)
	var shard string
	deadline := time.Now().Add(waitLimit)
	for {
		for s, st := range r.Stats().Shards {
			if st.RecordsRead == 1 {
				shard = s
			}
		}
		if shard != "" || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond) // polling for progress.added, not a timed assertion
	}
	st := r.Stats().Shards[shard]
	t.Logf("shard %s: LastAdded %s LatestCompleted %s", shard, st.LastAdded, st.LatestCompleted)
	if !r.progress.allCompleted(shard) {
		r.progress.mu.Lock()
		n := r.progress.shards[shard].pending
		r.progress.mu.Unlock()
		t.Errorf("the shard's only block was completed, yet allCompleted = false: pending %d for good", n)
	}
}
