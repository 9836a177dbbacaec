package kinesis

import (
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/source"
)

// TestEstimator checks the rate the estimator sets after each report.
func TestEstimator(t *testing.T) {
	iv := time.Second
	report := func(records int, processing, delay time.Duration) source.BatchReport {
		return source.BatchReport{Interval: iv, Records: records, ProcessingTime: processing, SchedulingDelay: delay}
	}
	tests := []struct {
		name    string
		initial float64
		kp      float64 // Proportional; 0: the default
		reports []source.BatchReport
		want    []float64 // the rate after each report; NaN: no new rate
	}{
		{
			name: "the first report sets the processing rate",
			reports: []source.BatchReport{
				report(1000, 500*time.Millisecond, 0), // 2000/s
			},
			want: []float64{2000},
		},
		{
			name: "reports without records or time say nothing",
			reports: []source.BatchReport{
				report(0, time.Second, 0),
				report(10, 0, 0),
				report(1000, time.Second, 0),
			},
			want: []float64{math.NaN(), math.NaN(), 1000},
		},
		{
			name: "a backlog takes the rate below the processing rate",
			reports: []source.BatchReport{
				report(1000, time.Second, 0),                  // 1000/s
				report(1000, time.Second, 2*time.Second),      // 1000 - 0.2*2*1000
				report(600, 600*time.Millisecond, 0),          // back to 1000/s
				report(100, 100*time.Millisecond, 10*iv),      // 1000 - 0.2*10*1000 < min
				report(4000, 1000*time.Millisecond, 0),        // 4000/s
				report(4000, 2000*time.Millisecond, 0),        // slower: 2000/s
				report(4000, 2000*time.Millisecond, iv/2),     // 2000 - 0.2*0.5*2000
				report(3000, 1000*time.Millisecond, 0),        // 3000/s
				report(3000, 1000*time.Millisecond, 0),        // steady
				report(3000, 1000*time.Millisecond, 5*iv/100), // 3000 - 0.2*0.05*3000
			},
			want: []float64{1000, 600, 1000, 100, 4000, 2000, 1800, 3000, 3000, 2970},
		},
		{
			name: "a smaller proportional gain moves halfway, after a first estimate that jumps", initial: 100, kp: 0.5,
			reports: []source.BatchReport{
				report(1000, time.Second, 0),
				report(2000, time.Second, 0),
				report(2000, time.Second, 0),
			},
			want: []float64{1000, 1500, 1750},
		},
		{
			name: "an initial rate is replaced by the first report", initial: 500,
			reports: []source.BatchReport{report(1000, 250*time.Millisecond, 0)},
			want:    []float64{4000},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := rateConfig{InitialRate: tt.initial, Proportional: tt.kp}.withDefaults()
			e := estimator{cfg: cfg, rate: cfg.InitialRate}
			for i, r := range tt.reports {
				got, ok := e.update(r)
				want := tt.want[i]
				switch {
				case math.IsNaN(want) && ok:
					t.Errorf("report %d %+v: rate %v, want none", i, r, got)
				case !math.IsNaN(want) && (!ok || math.Abs(got-want) > 1e-6):
					t.Errorf("report %d %+v: rate %v (%v), want %v", i, r, got, ok, want)
				}
			}
		})
	}
}

// TestLimiter checks, in virtual time, that a limiter hands out tokens at
// its rate, at most a second's worth at once, waits for the least asked
// for, takes back what a read did not use, and wakes its waiters when the
// rate changes.
func TestLimiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		l := newLimiter(clock.Real{}, 100, time.Second)
		take := func(want, least int) (int, time.Duration) {
			t.Helper()
			start := time.Now()
			n, err := l.take(ctx, want, least)
			if err != nil {
				t.Fatal(err)
			}
			return n, time.Since(start)
		}
		if n, waited := take(1000, 1); n != 100 || waited != 0 {
			t.Errorf("first take: %d after %v, want the full bucket (100) at once", n, waited)
		}
		if n, waited := take(1000, 20); n != 20 || waited != 200*time.Millisecond {
			t.Errorf("take of at least 20: %d after %v, want 20 after 200ms", n, waited)
		}
		l.giveBack(15)
		if n, waited := take(10, 10); n != 10 || waited != 0 {
			t.Errorf("take after a give-back: %d after %v, want 10 at once", n, waited)
		}
		time.Sleep(10 * time.Second)
		if n, _ := take(1000, 1); n != 100 {
			t.Errorf("take after 10s idle: %d, want 100 (a second's worth, no more)", n)
		}

		got := make(chan int)
		go func() {
			n, _ := l.take(ctx, 1000, 500) // waits for 100: the bucket holds no more
			got <- n
		}()
		time.Sleep(500 * time.Millisecond) // 50 tokens: not enough
		synctest.Wait()
		l.setRate(0)
		if n := <-got; n != 1000 {
			t.Errorf("take when the limit is lifted: %d, want all 1000 asked for", n)
		}
	})
}
