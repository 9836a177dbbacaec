package stream_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/stream/internal/recoverycheck"
)

// TestIdleLogEntries checks that an idle pipeline without state writes at
// most one recovery log entry per 10 s of empty batches (a reservation of
// batch times), not an allocation and a completion per batch.
func TestIdleLogEntries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			iv      = 200 * time.Millisecond
			batches = 300 // 60 s
		)
		store := recoverylog.NewMemory()
		appended := recordAppends(store)
		rl := recoverycheck.NewRecorder()
		p := shapedPipeline(t, stream.Config{BatchInterval: iv, Recovery: store, Listeners: []stream.Listener{rl}}, "", "files")
		errc := make(chan error, 1)
		go func() { errc <- p.Run(t.Context()) }()
		time.Sleep(batches*iv + iv/2)
		p.Stop()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		if n := len(rl.Completed()); n < batches {
			t.Fatalf("%d batches completed, want %d: the test does not test", n, batches)
		}
		entries := *appended
		const most = (batches*iv+10*time.Second-1)/(10*time.Second) + 1 // the reservations, and the shape
		if len(entries) > int(most) {
			t.Errorf("%d batches of an idle pipeline wrote %d log entries, want at most %d: %v", batches, len(entries), most, entries)
		}
	})
}

// recordAppends returns the entries appended to store from now on, which
// compaction does not shorten as it does store.Entries().
func recordAppends(store *recoverylog.MemoryStore) *[]recoverylog.Entry {
	var appended []recoverylog.Entry
	store.SetAppendHook(func(_ int, entries []recoverylog.Entry) recoverylog.Fault {
		appended = append(appended, entries...)
		return recoverylog.Fault{}
	})
	return &appended
}

// TestIdleBatchTimesNotReused restarts a pipeline that ran empty batches
// after its last batch with records, on a clock behind the time of those
// empty batches: its new batches come after every batch time the first run's
// outputs saw (the files sink wrote an empty file for each, which a batch
// with records at the same time would not overwrite), so every record
// reaches the files.
func TestIdleBatchTimesNotReused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := &durable{log: recoverylog.NewMemory(), out: t.TempDir()}
		clk := &wallClock{}
		rl1 := recoverycheck.NewRecorder()
		p1, src1 := pipeline(t, d, rl1, hooks{clock: clk})
		errc := make(chan error, 1)
		go func() { errc <- p1.Run(t.Context()) }()
		time.Sleep(300 * time.Millisecond)
		src1.produce(d.record(), d.record())
		time.Sleep(6 * time.Second) // a batch with records, then empty ones
		p1.Stop()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		st1, err := recoverylog.Recover(d.log.Entries())
		if err != nil {
			t.Fatal(err)
		}
		first := rl1.Completed()
		if len(first) < 5 {
			t.Fatalf("first run completed %v: the test does not test", first)
		}

		clk.setLag(5 * time.Second) // behind the first run's last empty batches
		rl2 := recoverycheck.NewRecorder()
		p2, src2 := pipeline(t, d, rl2, hooks{clock: clk})
		go func() { errc <- p2.Run(t.Context()) }()
		src2.produce(d.record(), d.record())
		time.Sleep(2 * time.Second)
		p2.Drain(context.Background())
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		second := rl2.Completed()
		if len(second) == 0 || second[0] <= slices.Max(first) {
			t.Errorf("second run's batches %v, want them after every batch of the first run %v", second, first)
		}
		d.check(t, st1, rl1, rl2)
	})
}

// TestFailureRecoveryIdle is TestFailureRecovery with idle periods between
// bursts of records, the crash injected where the log changed: at a
// reservation of batch times, in an empty batch's output, at the
// completion of the first batch with records after an idle period.
func TestFailureRecoveryIdle(t *testing.T) {
	tests := []crashCase{
		{name: "crash at a reservation", setup: func(d *durable, stop func()) hooks {
			d.log.SetAppendHook(nthAppend(recoverylog.KindBatchesReserved, 2, 0, stop))
			return hooks{}
		}},
		{name: "reservation append fails", setup: func(d *durable, _ func()) hooks {
			d.log.SetAppendHook(nthAppend(recoverylog.KindBatchesReserved, 2, 0, nil))
			return hooks{}
		}, wantErr: errCrash},
		{name: "stop in an empty batch's output", setup: func(_ *durable, stop func()) hooks {
			empty := 0
			return hooks{out: func(ctx context.Context, i, _ int, b *batch.Batch[string]) error {
				if i == 0 && b.Len() == 0 {
					if empty++; empty == 30 {
						stop()
						return ctx.Err()
					}
				}
				return nil
			}}
		}},
		{name: "crash at a completion after an idle period", setup: func(d *durable, stop func()) hooks {
			d.log.SetAppendHook(nthAppend(recoverylog.KindBatchCompleted, 5, 0, stop))
			return hooks{}
		}},
	}
	for _, tc := range tests {
		tc.mayLeaveNothing = true // a crash in an idle period leaves nothing pending
		tc.produce = produceBursts
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testFailureRecovery(t, tc) })
		})
	}
}

// produceBursts puts bursts of 4 pushes of three records, 100ms apart
// (about 2 batches with records), each followed by 25 s idle, until Run
// returns, and returns Run's error; after 40 bursts, an error saying the
// crash never came.
func produceBursts(d *durable, src *replay, errc <-chan error) error {
	return produceBurstsOf(d, src, 4, 100*time.Millisecond, 25*time.Second, errc)
}

// produceBurstsOf is produceBursts with bursts of pushes pushes, every
// apart, each followed by idle.
func produceBurstsOf(d *durable, src *replay, pushes int, every, idle time.Duration, errc <-chan error) error {
	for range 40 {
		for range pushes {
			src.produce(d.record(), d.record(), d.record())
			select {
			case err := <-errc:
				return err
			case <-time.After(every):
			}
		}
		select {
		case err := <-errc:
			return err
		case <-time.After(idle):
		}
	}
	return errors.New("no crash after 40 bursts: the test does not test")
}
