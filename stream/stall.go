package stream

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/clock"
)

// minSlowBatch is the least time a batch runs before the driver warns that
// it is still running: long enough for outputs' retries (Retry's waits of
// 1, 2, 4... s) and recomputations after a restart, which say so
// themselves.
const minSlowBatch = time.Minute

// slowBatchAfter returns how long a batch runs, with batch interval iv,
// before the driver first warns that it is still running: 10 intervals,
// and at least minSlowBatch.
func slowBatchAfter(iv time.Duration) time.Duration { return max(10*iv, minSlowBatch) }

// watch calls warn, with how long it has been since start, once that is
// after, and again each time it doubles, until the func it returns is
// called: that func ends the watch and reports whether warn was called.
// The engine's watcher runs every watch, in one goroutine of the Run's:
// a batch starts no goroutine nor timer of its own.
func (e *engine) watch(start time.Time, after time.Duration, warn func(waited time.Duration)) (end func() (warned bool)) {
	return e.watcher.watch(start, after, warn)
}

// watcher runs the watches of a Run (engine.watch): its goroutine, run,
// waits for the earliest warning due among them. Batches run one at a
// time and are cut one at a time, so a watch is begun and ended many times
// a second; each takes a lock and, only when it is due before the timer
// fires, a timer reset.
type watcher struct {
	clock   clock.Clock
	mu      sync.Mutex
	watches []*watched
	timer   clock.Timer // fires at armed, if set
	armed   time.Time
	wake    chan struct{} // tells run that armed moved earlier
}

// watched is one watch: warn is due when it has been after since start.
type watched struct {
	start  time.Time
	after  time.Duration
	warn   func(waited time.Duration)
	warned bool
}

func newWatcher(c clock.Clock) *watcher {
	return &watcher{clock: c, wake: make(chan struct{}, 1)}
}

// watch begins a watch: see engine.watch.
func (w *watcher) watch(start time.Time, after time.Duration, warn func(time.Duration)) func() bool {
	x := &watched{start: start, after: after, warn: warn}
	w.mu.Lock()
	w.watches = append(w.watches, x)
	if due := start.Add(after); w.armed.IsZero() || due.Before(w.armed) {
		w.armed = due
		select { // run resets the timer
		case w.wake <- struct{}{}:
		default:
		}
	}
	w.mu.Unlock()
	return func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.watches = slices.DeleteFunc(w.watches, func(y *watched) bool { return y == x })
		return x.warned
	}
}

// run calls the warnings as they fall due until stop is closed.
func (w *watcher) run(stop <-chan struct{}) {
	w.timer = w.clock.NewTimer(time.Hour)
	defer w.timer.Stop()
	w.timer.Stop()
	for {
		select {
		case <-stop:
			return
		case <-w.wake:
		case <-w.timer.C():
		}
		w.mu.Lock()
		now := w.clock.Now()
		var next time.Time
		for _, x := range w.watches {
			if waited := now.Sub(x.start); waited >= x.after {
				x.warned = true
				x.warn(waited)
				for now.Sub(x.start) >= x.after {
					x.after *= 2
				}
			}
			if due := x.start.Add(x.after); next.IsZero() || due.Before(next) {
				next = due
			}
		}
		w.armed = next
		w.timer.Stop()
		if !next.IsZero() {
			w.timer.Reset(max(next.Sub(now), 0))
		}
		w.mu.Unlock()
	}
}

// watchBatch watches batch t, started at start, while it runs: once it has
// run slowBatchAfter the interval, and again each time that time doubles,
// it logs at WARN that the batch is still running, naming the output
// running and the shards it runs (see progress), since nothing else would
// show a hung output or state update (the batch timer waits, and reading
// stops, in silence). A Run stopping waits for the batch too: an
// output that ignores its ctx is warned about the same way. The func
// returned ends the watch; for a batch it
// warned about, it logs at INFO how long the batch took.
func (e *engine) watchBatch(ctx context.Context, t batch.Time, start time.Time) (end func()) {
	ended := e.watch(start, slowBatchAfter(e.cfg.BatchInterval), func(running time.Duration) {
		fix := "an output or a state update is slow or does not return (unless the output's own warnings " +
			"show it being retried): look for a call without a deadline, and use the ctx the output is given; " +
			"batches wait meanwhile and receivers stop reading"
		if ctx.Err() != nil {
			fix = "the pipeline is stopping and waits for the batch: an output does not return when its ctx is done"
		}
		args := []any{"batch", t, "running", running.Round(time.Second), "batch_interval", e.cfg.BatchInterval}
		if r := e.current.Load(); r != nil && r.job.time == t {
			args = append(args, r.progress.describe(e.outputs)...)
		}
		e.cfg.Logger.Warn("stream: batch still running", append(args, "fix", fix)...)
	})
	return func() {
		if ended() {
			e.cfg.Logger.Info("stream: a batch warned about as still running has ended",
				"batch", t, "took", e.cfg.Clock.Now().Sub(start).Round(time.Millisecond))
		}
	}
}

// progress is what a batch runs, for watchBatch's warnings, which read it
// from the watcher's goroutine: the output, and, for one run by partitions
// (ForEach, ForEachPartition), the partitions running. It is set once per
// output and partition, never per record: naming the record a ForEach
// function is on would cost a synchronised write per record.
type progress struct {
	mu     sync.Mutex
	output int // index+1 in the engine's outputs; 0 before the first
	keys   []partKey
	states []partState // states[i].running tells partition keys[i] runs
}

// at records that output i runs.
func (p *progress) at(i int) {
	p.mu.Lock()
	p.output, p.keys, p.states = i+1, nil, nil
	p.mu.Unlock()
}

// parts records the partitions of the output running, and their states.
func (p *progress) parts(keys []partKey, states []partState) {
	p.mu.Lock()
	p.keys, p.states = keys, states
	p.mu.Unlock()
}

// describe returns the log attributes of what runs: the output running,
// if one is, and the shards (or partitions, by index, for those of no
// shard) whose partitions it runs.
func (p *progress) describe(outputs []*output) []any {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.output == 0 {
		return nil
	}
	args := []any{"output", outputs[p.output-1].String()}
	var shards []string
	for i := range p.states {
		if !p.states[i].running.Load() {
			continue
		}
		if k := p.keys[i]; k.shard != "" {
			shards = append(shards, k.stream+"/"+k.shard)
		} else {
			shards = append(shards, fmt.Sprintf("partition %d", i))
		}
	}
	if len(shards) > 0 {
		args = append(args, "shards", shards)
	}
	return args
}

// cutWatched cuts the batch at time t (cut) while it watches the cut: a cut
// waits for the recovery log's appends (of the blocks in the batch, then of
// its allocation), so a log that stops answering (a hung disk under
// recovery.Dir, a custom recovery.Log) stops every batch and, through the
// pushes waiting too, all reading, which nothing else would show. Once the
// cut has waited slowBatchAfter the interval, and each time that doubles,
// it logs at WARN; at INFO when such a cut is done. Without a recovery log
// a cut does not wait and is not watched.
func (e *engine) cutWatched(ctx context.Context, t batch.Time) (*job, error) {
	if _, ok := e.log.(noLog); ok {
		return e.cut(ctx, t)
	}
	start := e.cfg.Clock.Now()
	ended := e.watch(start, slowBatchAfter(e.cfg.BatchInterval), func(waited time.Duration) {
		e.cfg.Logger.Warn("stream: cutting a batch waits for the recovery log: no batch runs and reading stops meanwhile",
			"batch", t, "waited", waited.Round(time.Second),
			"fix", "the recovery log's appends do not complete: check the disk or file system of recovery.Dir "+
				"(or the recovery.Log in Config.Recovery, whose own warnings say more)")
	})
	j, err := e.cut(ctx, t)
	if ended() {
		e.cfg.Logger.Info("stream: a batch cut warned about as waiting for the recovery log is done",
			"batch", t, "took", e.cfg.Clock.Now().Sub(start).Round(time.Millisecond))
	}
	return j, err
}

// processWatched runs process for batch j, started at start, while
// watchBatch watches it. The watch ends however process ends, a
// runtime.Goexit in a user function included.
func (e *engine) processWatched(ctx context.Context, j *job, start time.Time, outs []OutputInfo) error {
	defer e.watchBatch(ctx, j.time, start)()
	return e.process(ctx, j, outs)
}

// stopWarnAfter is how long after its context is done, or a drain was
// requested, a Run first warns that it still waits for what has not
// returned.
const stopWarnAfter = time.Minute

// watchStop waits until ctx, the Run's, is done or a drain is requested on
// drainc, then until ended is closed (every goroutine of the Run has
// returned): once that has taken stopWarnAfter, and again each time the
// wait doubles, it logs at WARN what Run still waits for, since Run cannot
// return before a receiver's Start or Stop, or an output, that ignores its
// ctx does. A batch still running, alone, is left to watchBatch's
// warnings; while a drain runs batches, only receivers that have not
// returned are warned about.
func (e *engine) watchStop(ctx context.Context, drainc <-chan struct{}, ended <-chan struct{}) {
	select {
	case <-ended:
		return
	case <-ctx.Done():
	case <-drainc:
	}
	waitWarning(e.cfg.Clock, ended, stopWarnAfter, func(waited time.Duration) {
		var starting, stopping []int
		for i := range e.sources {
			if e.receiving[i].Load() {
				starting = append(starting, i)
			}
			if e.inStop[i].Load() {
				stopping = append(stopping, i)
			}
		}
		receivers := len(starting) > 0 || len(stopping) > 0
		switch {
		case ctx.Err() == nil && receivers:
			e.cfg.Logger.Warn("stream: the pipeline is draining and still waits for receivers to stop",
				"waited", waited.Round(time.Second), "sources", starting, "stopping_sources", stopping,
				"fix", "a receiver's Stop must return once it has pushed what it holds, and its Start then; "+
					"Drain's ctx bounds the wait (Config.DrainTimeout when Run's ctx is done), and Stop stops now")
		case ctx.Err() != nil && (receivers || !e.running.Load()):
			e.cfg.Logger.Warn("stream: the pipeline is stopping and Run still waits for what has not returned",
				"waited", waited.Round(time.Second), "sources", starting, "stopping_sources", stopping,
				"batch_running", e.running.Load(),
				"fix", "a receiver's Start (sources) and Stop (stopping_sources), its Recompute, and an output "+
					"must return once their ctx is done")
		}
	})
}

// waitWarning waits until done is closed, calling warn with how long it
// has waited once that is after, and again each time it doubles, on clk.
func waitWarning(clk clock.Clock, done <-chan struct{}, after time.Duration, warn func(waited time.Duration)) {
	since := clk.Now()
	timer := clk.NewTimer(after)
	defer timer.Stop()
	for {
		select {
		case <-done:
			return
		case <-timer.C():
		}
		waited := clk.Now().Sub(since)
		after *= 2
		timer.Reset(max(after-waited, 0))
		warn(waited)
	}
}

// lateness warns when batches start far behind schedule, which no default
// log showed (the metrics Collector warns earlier, when it is configured):
// once the scheduling delay of a batch cut in this Run passes
// slowBatchAfter the interval, again each time it doubles, and at INFO
// once it is back under half that. Recovered batches are left out: their
// delay is the time the pipeline was down.
//
// The warning says why, as far as the clock tells: a batch that starts
// late because the batches before it ran long (the batch runner was busy)
// is processing slower than the interval; one whose delay mostly passed
// while no batch ran was cut late: the wall clock stepped forward (the
// driver then runs every batch time it skipped, back to back), or the
// process was paused. The time no batch ran is the wall time since the
// previous batch started less the time the runner spent on it (its
// outputs, its state snapshot, its events), measured on the clock's
// monotonic readings when it has them (clock.Real), so a step of the wall
// clock during a batch counts as time no batch ran too; on a clock without
// them, it counts as the batch running long.
type lateness struct {
	level time.Duration // the delay last warned about; 0 when not warned
	// The batch runner's last batch: when it began, 0 before the first,
	// and how long the runner spent on it.
	prevStart time.Time
	prevTook  time.Duration
}

// ran notes a batch the runner began at start and spent took on.
func (l *lateness) ran(start time.Time, took time.Duration) {
	l.prevStart, l.prevTook = start, took
}

// idle returns how long, of the wall time between the start of the
// previous batch and start, no batch ran; for the Run's first batch, the
// longest duration: no batch ran before it.
func (l *lateness) idle(start time.Time) time.Duration {
	if l.prevStart.IsZero() {
		return math.MaxInt64
	}
	return start.Round(0).Sub(l.prevStart.Round(0)) - l.prevTook
}

// check looks at the scheduling delay of batch t, started at start.
func (l *lateness) check(logger *slog.Logger, t batch.Time, start time.Time, delay, iv time.Duration) {
	limit := slowBatchAfter(iv)
	switch {
	case l.level > 0 && delay < limit/2:
		l.level = 0
		logger.Info("stream: batches back on schedule", "batch", t, "delay", delay.Round(time.Millisecond))
	case delay >= limit && (l.level == 0 || delay >= 2*l.level):
		l.level = delay
		if idle := l.idle(start); idle >= delay/2 {
			logger.Warn("stream: batches fall behind schedule, but not because processing is slow: the batch was cut late, "+
				"while no batch ran", "batch", t, "delay", delay.Round(time.Millisecond), "batch_interval", iv,
				"fix", "the wall clock stepped forward (NTP, a virtual machine resumed), and the driver runs every batch time "+
					"it skipped, back to back, until it has caught up, which needs nothing; or the process was paused or starved "+
					"of CPU (a cut waiting for the recovery log is warned about on its own)")
			return
		}
		logger.Warn("stream: batches fall behind schedule", "batch", t, "delay", delay.Round(time.Millisecond),
			"batch_interval", iv,
			"fix", "processing is slower than the batch interval: make the outputs faster, raise "+
				"stream.Config.BatchInterval, or spread the shards over more workers; "+
				"the metrics Collector shows processing times and warns earlier")
	}
}
