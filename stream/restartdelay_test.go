package stream_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/stream"
)

// delays notes the scheduling delay of every batch with records that
// completed, and how far its time was ahead of the clock when it started.
type delays struct {
	stream.NopListener
	mu     sync.Mutex
	delays []time.Duration
	ahead  time.Duration
}

func (d *delays) BatchStarted(info stream.BatchInfo) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ahead = max(d.ahead, time.Until(info.Time.Std()))
}

func (d *delays) BatchCompleted(info stream.BatchInfo) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if info.Err == nil && info.Records > 0 {
		d.delays = append(d.delays, info.SchedulingDelay)
	}
}

// TestSchedulingDelayAfterRestart restarts an idle pipeline whose log
// reserved batch times ahead of the clock: the restarted Run's batches
// follow the reserved times, ahead of the clock, an interval apart. Their
// scheduling delay (what the listeners, the metrics and the Kinesis
// receiver's rate estimator see) is still how late each started after it
// was due, never negative: a negative one would read to the rate
// estimator as a batch ahead of schedule and raise the read rate of an
// overloaded pipeline.
func TestSchedulingDelayAfterRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := &durable{log: recoverylog.NewMemory()}
		var dl *delays
		dl = &delays{}
		runIdleThenCrash(t, d, stream.Config{BatchInterval: time.Second, Listeners: []stream.Listener{dl}}, 0)
		dl = &delays{}
		runIdleThenDrain(t, d, stream.Config{BatchInterval: time.Second, Listeners: []stream.Listener{dl}}, 10)
		dl.mu.Lock()
		defer dl.mu.Unlock()
		if dl.ahead < time.Second || len(dl.delays) < 3 {
			t.Fatalf("batches at most %v ahead of the clock, %d with records: the test does not test", dl.ahead, len(dl.delays))
		}
		for _, delay := range dl.delays {
			if delay < 0 {
				t.Errorf("scheduling delays %v of the restarted Run (batch times up to %v ahead of the clock), want none negative", dl.delays, dl.ahead)
				break
			}
		}
	})
}

// TestRestartAfterReservationDoesNotWarn restarts an idle pipeline whose
// log reserved batch times ahead of the clock (one entry per 10 s): the
// restarted Run follows the reserved times, at most one reservation and an
// interval ahead of the clock, and says so at INFO, not with the warning
// of a clock behind the log, which it is not.
func TestRestartAfterReservationDoesNotWarn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := &durable{log: recoverylog.NewMemory()}
		var warned, informed []string
		logger := slog.New(slog.NewTextHandler(lineWriter(func(line string) {
			switch {
			case strings.Contains(line, "level=WARN"):
				warned = append(warned, line)
			case strings.Contains(line, "reserved"):
				informed = append(informed, line)
			}
		}), nil))
		var dl *delays
		dl = &delays{}
		runIdleThenCrash(t, d, stream.Config{BatchInterval: time.Second, Listeners: []stream.Listener{dl}, Logger: logger}, 0)
		warned = nil // the crash's own
		dl = &delays{}
		runIdleThenDrain(t, d, stream.Config{BatchInterval: time.Second, Listeners: []stream.Listener{dl}, Logger: logger}, 0)
		dl.mu.Lock()
		defer dl.mu.Unlock()
		if dl.ahead <= 0 {
			t.Fatalf("the restart started %v ahead of the clock: the test does not test", dl.ahead)
		}
		if len(informed) == 0 {
			t.Errorf("the restart did not log that it follows the reserved batch times")
		}
		if limit := 10*time.Second + time.Second; dl.ahead > limit {
			t.Errorf("the restart's batch times %v ahead of the clock, want at most %v (a reservation and an interval)", dl.ahead, limit)
		}
		if len(warned) > 0 {
			t.Errorf("a restart after a reservation warned:\n%s", strings.Join(warned, ""))
		}
	})
}

// lineWriter is an io.Writer calling f with each write, a log line.
type lineWriter func(line string)

func (f lineWriter) Write(b []byte) (int, error) {
	f(string(b))
	return len(b), nil
}

// runIdleThenDrain runs a pipeline of cfg with d's log, reading d's
// records: idle for 25 s, then producing records records 300 ms apart,
// then drained 2 s later.
func runIdleThenDrain(t *testing.T, d *durable, cfg stream.Config, records int) {
	t.Helper()
	runIdle(t, d, cfg, records, false)
}

// runIdleThenCrash is runIdleThenDrain, but the Run ends as if its process
// died instead of the drain: its log is frozen (nothing more is written)
// and the Run stopped.
func runIdleThenCrash(t *testing.T, d *durable, cfg stream.Config, records int) {
	t.Helper()
	runIdle(t, d, cfg, records, true)
}

func runIdle(t *testing.T, d *durable, cfg stream.Config, records int, crash bool) {
	t.Helper()
	cfg.Recovery = d.log
	p, err := stream.NewPipeline(cfg)
	if err != nil {
		t.Fatal(err)
	}
	src := newReplay(t, d)
	stream.ForEachBatch(stream.From(p, src), func(context.Context, *batch.Batch[string]) error { return nil })
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- p.Run(ctx) }()
	time.Sleep(25 * time.Second)
	for range records {
		src.produce(d.record())
		time.Sleep(300 * time.Millisecond)
	}
	time.Sleep(2 * time.Second)
	if crash {
		d.log.Freeze(errors.New("the process died"))
		cancel()
		<-errc
		d.log.Freeze(nil)
		return
	}
	p.Drain(context.Background())
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// TestRestartAfterDrainStartsAtTheClock drains an idle pipeline whose log
// reserved batch times ahead of the clock, and restarts it, again and
// again: a drained Run gives back the times it reserved past its last
// batch, so each restart's batches start at the clock (they used to start
// after the reservation, up to 10 s further ahead at each restart, for
// good).
func TestRestartAfterDrainStartsAtTheClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := &durable{log: recoverylog.NewMemory()}
		for i := range 4 {
			dl := &delays{}
			runIdleThenDrain(t, d, stream.Config{BatchInterval: time.Second, Listeners: []stream.Listener{dl}}, 0)
			dl.mu.Lock()
			ahead := dl.ahead
			dl.mu.Unlock()
			if ahead > time.Second {
				t.Fatalf("Run %d: batch times %v ahead of the clock, want at most an interval", i+1, ahead)
			}
		}
	})
}

// TestRestartAfterCrashesInARowSaysWhy restarts an idle pipeline whose
// Runs crashed twice in a row: each reserved batch times up to 10 s past
// its last batch, which followed the reservation before it, so the third
// Run's batch times are some 20 s ahead of the clock. It warns, but of
// what happened (the reservations of Runs that crashed), not of a clock
// behind the log, which it is not.
func TestRestartAfterCrashesInARowSaysWhy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := &durable{log: recoverylog.NewMemory()}
		var warned []string
		logger := slog.New(slog.NewTextHandler(lineWriter(func(line string) {
			if strings.Contains(line, "level=WARN") {
				warned = append(warned, line)
			}
		}), nil))
		cfg := stream.Config{BatchInterval: time.Second, Logger: logger}
		runIdleThenCrash(t, d, cfg, 0)
		runIdleThenCrash(t, d, cfg, 0)
		warned = nil // the crashes' own
		dl := &delays{}
		cfg.Listeners = []stream.Listener{dl}
		runIdleThenDrain(t, d, cfg, 0)
		dl.mu.Lock()
		defer dl.mu.Unlock()
		if dl.ahead <= 10*time.Second+time.Second {
			t.Fatalf("the restart started %v ahead of the clock: the test does not test", dl.ahead)
		}
		var said bool
		for _, line := range warned {
			if strings.Contains(line, "clock is behind") {
				t.Errorf("the restart blamed the clock for the reservations of crashed Runs:\n%s", line)
			}
			said = said || strings.Contains(line, "crashed")
		}
		if !said {
			t.Errorf("the restart %v ahead of the clock did not warn that Runs crashed in a row; warnings:\n%s", dl.ahead, strings.Join(warned, ""))
		}
	})
}
