package kinesis

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/source"
)

// The backpressure estimator's tuning (rateConfig): the defaults of
// Spark Streaming's PID rate estimator, without its derivative term.
const (
	rateProportional = 1.0
	rateIntegral     = 0.2
	// minRate is the lowest read rate, in records/s over all shards, the
	// estimator sets, so that a pipeline that was slow once still reads;
	// it is also the rate before the first estimate.
	minRate = 100.0
)

// rateConfig tunes backpressure (Config.Backpressure): the receiver reads
// no faster than the pipeline processes, so batches keep their scheduling
// delay bounded and a backlog stays in Kinesis instead of in memory. After
// every batch the driver reports (source.BatchObserver), the receiver
// estimates the rate the pipeline can process its records at (its records
// in the batch over the batch's processing time) and sets its read rate,
// over all its shards, to
//
//	rate - Proportional*(rate - processing rate) - Integral*backlog
//
// where backlog is the batch's scheduling delay times the processing rate
// over the batch interval: the records per second to take off for the
// pipeline to catch up within a batch interval. With the defaults the rate
// becomes the processing rate, less a fifth of the backlog. This is the
// PID rate estimator of Spark Streaming's backpressure, without its
// derivative term. The zero value of each field is its default; users
// cannot set them (one flow setting, DESIGN.md "Memory and flow
// control"), tests do.
//
// The rate is shared by the receiver's shards: a shard with records takes
// what another, idle, leaves. At most a batch interval's worth of records
// is read at once after an idle time, so a burst reaches the pipeline at
// the rate it processes. A batch with none of the receiver's records,
// or that took no time, says nothing about the processing rate and leaves
// the rate as it is.
type rateConfig struct {
	// InitialRate is the read rate, in records/s over all shards, until
	// the first batch with records is reported. Default: MinRate, a slow
	// start: the first batch measures the processing rate on few records,
	// and the rate moves to it at once.
	InitialRate float64
	// MinRate is the lowest read rate, in records/s over all shards.
	// Default minRate.
	MinRate float64
	// Proportional weighs the difference between the read rate and the
	// processing rate. Default rateProportional.
	Proportional float64
	// Integral weighs the backlog (scheduling delay). Default
	// rateIntegral.
	Integral float64
}

func (c rateConfig) withDefaults() rateConfig {
	if c.MinRate == 0 {
		c.MinRate = minRate
	}
	if c.InitialRate == 0 {
		c.InitialRate = c.MinRate
	}
	if c.Proportional == 0 {
		c.Proportional = rateProportional
	}
	if c.Integral == 0 {
		c.Integral = rateIntegral
	}
	return c
}

// estimator is the backpressure rate estimator (rateConfig). Not safe for
// concurrent use: the driver reports one batch at a time.
type estimator struct {
	cfg       rateConfig
	rate      float64 // records/s; InitialRate until the first estimate
	estimated bool    // a batch with records was reported
}

// update takes a batch report and returns the new rate, and whether there
// is one.
func (e *estimator) update(b source.BatchReport) (float64, bool) {
	if b.Records <= 0 || b.ProcessingTime <= 0 || b.Interval <= 0 {
		return 0, false
	}
	processing := float64(b.Records) / b.ProcessingTime.Seconds()
	backlog := b.SchedulingDelay.Seconds() * processing / b.Interval.Seconds()
	if !e.estimated { // the first estimate: nothing to correct yet
		e.rate, e.estimated = processing, true
	} else {
		e.rate -= e.cfg.Proportional*(e.rate-processing) + e.cfg.Integral*backlog
	}
	e.rate = max(e.rate, e.cfg.MinRate)
	return e.rate, true
}

// limiter is a token bucket of records: a reader takes tokens before a
// GetRecords call, as its Limit, and gives back those the call did not
// use. Its rate can change at any time; rate 0 means no limit. It holds
// at most window's worth of tokens (and at least one), which bounds a
// burst after an idle time. Safe for concurrent use.
type limiter struct {
	clk    clock.Clock
	window time.Duration

	mu      sync.Mutex
	rate    float64 // tokens per second; 0: no limit
	tokens  float64
	last    time.Time     // when tokens was last brought up to date
	changed chan struct{} // closed and replaced when the rate changes
}

func newLimiter(clk clock.Clock, rate float64, window time.Duration) *limiter {
	l := &limiter{clk: clock.Or(clk), window: window, rate: rate, changed: make(chan struct{})}
	l.last = l.clk.Now()
	l.tokens = l.capacityLocked() // a full bucket: the first read does not wait
	return l
}

// refillLocked brings tokens up to date.
func (l *limiter) refillLocked(now time.Time) {
	if l.rate > 0 {
		l.tokens = min(l.tokens+now.Sub(l.last).Seconds()*l.rate, l.capacityLocked())
	}
	l.last = now
}

// capacityLocked is the most tokens the bucket holds: window's worth, and
// at least one.
func (l *limiter) capacityLocked() float64 { return max(l.rate*l.window.Seconds(), 1) }

// setRate changes the rate (0: no limit), keeping the tokens earned so far.
func (l *limiter) setRate(rate float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refillLocked(l.clk.Now())
	l.rate = rate
	l.tokens = min(l.tokens, l.capacityLocked())
	close(l.changed)
	l.changed = make(chan struct{})
}

// currentRate returns the rate (0: no limit).
func (l *limiter) currentRate() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rate
}

// take waits until at least least tokens (at most want, at least 1) are
// there, then takes as many as there are, up to want, and returns how
// many. Without a limit it returns want at once. It returns ctx.Err() if
// ctx is done first.
func (l *limiter) take(ctx context.Context, want, least int) (int, error) {
	least = max(min(least, want), 1)
	for {
		l.mu.Lock()
		now := l.clk.Now()
		l.refillLocked(now)
		if l.rate <= 0 {
			l.mu.Unlock()
			return want, nil
		}
		need := min(float64(least), math.Floor(l.capacityLocked()))
		if l.tokens >= need {
			n := min(want, int(l.tokens))
			l.tokens -= float64(n)
			l.mu.Unlock()
			return n, nil
		}
		wait := time.Duration((need - l.tokens) / l.rate * float64(time.Second))
		changed := l.changed
		l.mu.Unlock()
		t := l.clk.NewTimer(max(wait, time.Millisecond))
		select {
		case <-t.C():
		case <-changed:
		case <-ctx.Done():
			t.Stop()
			return 0, ctx.Err()
		}
		t.Stop()
	}
}

// giveBack returns n tokens a read did not use.
func (l *limiter) giveBack(n int) {
	if n <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rate > 0 {
		l.tokens = min(l.tokens+float64(n), l.capacityLocked())
	}
}
