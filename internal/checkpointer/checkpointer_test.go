package checkpointer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/checkpoint"
)

const testInterval = 10 * time.Millisecond

// latestSeq is a Config.Latest fake: per shard, a list of values returned in
// turn, the last one repeated.
type latestSeq struct {
	mu sync.Mutex
	m  map[string][]string
}

func newLatestSeq() *latestSeq { return &latestSeq{m: make(map[string][]string)} }

func (l *latestSeq) set(shard string, seqs ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.m[shard] = seqs
}

func (l *latestSeq) get(shard string) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.m[shard]
	if len(s) == 0 {
		return "", false
	}
	v := s[0]
	if len(s) > 1 {
		l.m[shard] = s[1:]
	}
	return v, true
}

type call struct{ Shard, Seq string }

// recorder is a Committer that records every attempt and may run a hook.
type recorder struct {
	mu    sync.Mutex
	calls []call
	hook  func(ctx context.Context, n int, shard, seq string) error
}

func (r *recorder) Commit(ctx context.Context, shard, seq string) error {
	r.mu.Lock()
	r.calls = append(r.calls, call{shard, seq})
	n, hook := len(r.calls), r.hook
	r.mu.Unlock()
	if hook != nil {
		return hook(ctx, n, shard, seq)
	}
	return nil
}

// lastOf returns the last number committed for shard, "" if none.
func (r *recorder) lastOf(shard string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.calls) - 1; i >= 0; i-- {
		if r.calls[i].Shard == shard {
			return r.calls[i].Seq
		}
	}
	return ""
}

func (r *recorder) got() []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]call(nil), r.calls...)
}

// syncBuffer is a bytes.Buffer safe for concurrent writes, for log capture.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newTestCheckpointer(t *testing.T, l *latestSeq) *Checkpointer {
	t.Helper()
	cp, err := New(Config{Interval: testInterval, Latest: l.get, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

// startRun runs cp.Run until the test ends; it must be called in a bubble.
func startRun(t *testing.T, cp *Checkpointer) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- cp.Run(ctx) }()
	return func() error {
		cancel()
		return <-errc
	}
}

func diffCalls(t *testing.T, want []call, r *recorder) {
	t.Helper()
	if d := cmp.Diff(want, r.got()); d != "" {
		t.Errorf("commits (-want +got):\n%s", d)
	}
}

// The seed's first two cases call the private per-shard checkpoint directly.
func TestCheckpointShardDirect(t *testing.T) {
	tests := []struct {
		name   string
		latest []string
		want   []call
	}{
		{"not called twice for the same sequence number", []string{"123"}, []call{{"s", "123"}}},
		{"called after the sequence number increases", []string{"123", "245"}, []call{{"s", "123"}, {"s", "245"}}},
		{"numeric, not string, order", []string{"9", "10"}, []call{{"s", "9"}, {"s", "10"}}},
		{"a lower number is not written", []string{"245", "123"}, []call{{"s", "245"}}},
		{"nothing stored yet", nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := newLatestSeq()
			if tc.latest != nil {
				l.set("s", tc.latest...)
			}
			cp := newTestCheckpointer(t, l)
			r := &recorder{}
			if err := cp.Register("s", r, ""); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if err := cp.fireShard(t.Context(), "s", cp.shards["s"]); err != nil {
					t.Fatal(err)
				}
			}
			diffCalls(t, tc.want, r)
		})
	}
}

func TestCheckpointerInterval(t *testing.T) {
	tests := []struct {
		name   string
		latest []string
		wait   time.Duration
		want   []call
	}{
		{"fires when the interval passes", []string{"123", "245"}, 5 * testInterval, []call{{"s", "123"}, {"s", "245"}}},
		{"does not fire before the interval", []string{"123"}, testInterval / 2, nil},
		{"same number not re-committed across intervals", []string{"123"}, 5 * testInterval, []call{{"s", "123"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := newLatestSeq()
				l.set("s", tc.latest...)
				cp := newTestCheckpointer(t, l)
				r := &recorder{}
				if err := cp.Register("s", r, ""); err != nil {
					t.Fatal(err)
				}
				stop := startRun(t, cp)
				time.Sleep(tc.wait)
				synctest.Wait()
				diffCalls(t, tc.want, r)
				if err := stop(); !errors.Is(err, context.Canceled) {
					t.Errorf("Run after cancel = %v, want context.Canceled", err)
				}
			})
		})
	}
}

func TestCheckpointerRemove(t *testing.T) {
	t.Run("removal checkpoints one last time", func(t *testing.T) {
		l := newLatestSeq()
		l.set("s", "123")
		cp := newTestCheckpointer(t, l)
		r := &recorder{}
		if err := cp.Remove(t.Context(), "s", r); err != nil {
			t.Fatal(err)
		}
		diffCalls(t, []call{{"s", "123"}}, r)
	})
	t.Run("lease-lost removal does not commit", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := newLatestSeq()
			l.set("s", "123")
			cp := newTestCheckpointer(t, l)
			r := &recorder{}
			if err := cp.Register("s", r, ""); err != nil {
				t.Fatal(err)
			}
			stop := startRun(t, cp)
			if err := cp.Remove(t.Context(), "s", nil); err != nil {
				t.Fatal(err)
			}
			time.Sleep(5 * testInterval)
			synctest.Wait()
			diffCalls(t, nil, r)
			_ = stop()
		})
	})
	t.Run("removal waits for a commit in flight, then commits", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := newLatestSeq()
			l.set("s", "123", "245")
			cp := newTestCheckpointer(t, l)
			release := make(chan struct{})
			r := &recorder{hook: func(ctx context.Context, n int, _, _ string) error {
				if n == 1 {
					<-release
				}
				return nil
			}}
			if err := cp.Register("s", r, ""); err != nil {
				t.Fatal(err)
			}
			stop := startRun(t, cp)
			time.Sleep(testInterval)
			synctest.Wait()
			diffCalls(t, []call{{"s", "123"}}, r)

			removed := make(chan error, 1)
			go func() { removed <- cp.Remove(context.Background(), "s", r) }()
			synctest.Wait()
			select {
			case err := <-removed:
				t.Fatalf("Remove returned %v while a commit was in flight", err)
			default:
			}
			close(release)
			if err := <-removed; err != nil {
				t.Fatal(err)
			}
			diffCalls(t, []call{{"s", "123"}, {"s", "245"}}, r)
			_ = stop()
		})
	})
}

// TestCheckpointerForget checks that Forget drops the counters of a shard
// no longer registered, keeps its counts in the totals, and leaves a
// registered shard as it is.
func TestCheckpointerForget(t *testing.T) {
	l := newLatestSeq()
	l.set("a", "123")
	l.set("b", "456")
	cp := newTestCheckpointer(t, l)
	r := &recorder{}
	for _, shard := range []string{"a", "b"} {
		if err := cp.Register(shard, r, ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := cp.Remove(t.Context(), "a", r); err != nil { // commits 123
		t.Fatal(err)
	}
	if err := cp.Remove(t.Context(), "b", r); err != nil { // commits 456
		t.Fatal(err)
	}
	if err := cp.Register("b", r, "456"); err != nil {
		t.Fatal(err)
	}
	cp.Forget("a", "b", "unknown")
	got := cp.Stats()
	want := checkpoint.Stats{Commits: 2, Shards: map[string]checkpoint.ShardStats{
		"b": {Registered: true, Committed: "456", Commits: 1},
	}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Stats after Forget (-want +got):\n%s", d)
	}
}

func TestCheckpointerRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLatestSeq()
		l.set("s", "7")
		cp := newTestCheckpointer(t, l)
		r := &recorder{hook: func(_ context.Context, n int, _, _ string) error {
			if n <= 2 {
				return errors.New("throttled")
			}
			return nil
		}}
		start := time.Now()
		if err := cp.Remove(t.Context(), "s", r); err != nil {
			t.Fatalf("Remove = %v, want success on the third attempt", err)
		}
		diffCalls(t, []call{{"s", "7"}, {"s", "7"}, {"s", "7"}}, r)
		// Two back-offs: 50-100ms then 100-200ms of virtual time.
		if d := time.Since(start); d < 150*time.Millisecond || d > 300*time.Millisecond {
			t.Errorf("retries took %v of virtual time, want 150ms..300ms", d)
		}
		want := checkpoint.ShardStats{Committed: "7", Commits: 1, Retries: 2}
		if d := cmp.Diff(want, cp.Stats().Shards["s"]); d != "" {
			t.Errorf("stats (-want +got):\n%s", d)
		}
	})
}

func TestCheckpointerLeaseLostNotRetried(t *testing.T) {
	l := newLatestSeq()
	l.set("s", "7")
	cp := newTestCheckpointer(t, l)
	r := &recorder{hook: func(context.Context, int, string, string) error {
		return fmt.Errorf("shard s: %w", ErrLeaseLost)
	}}
	err := cp.Remove(t.Context(), "s", r)
	if !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("Remove = %v, want ErrLeaseLost", err)
	}
	diffCalls(t, []call{{"s", "7"}}, r)
}

// TestCheckpointerLeaseLostNotWarned checks that a commit refused
// because another worker took the lease is logged at INFO, not as a
// failing commit at WARN: a lease moving to balance a fleet is no fault,
// and the lease coordinator says it lost the lease. The failure still
// counts in the shard's stats.
func TestCheckpointerLeaseLostNotWarned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLatestSeq()
		l.set("s", "7")
		logs := &syncBuffer{}
		cp, err := New(Config{Interval: testInterval, Latest: l.get, Logger: slog.New(slog.NewTextHandler(logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		r := &recorder{hook: func(context.Context, int, string, string) error {
			return fmt.Errorf("shard s: %w", ErrLeaseLost)
		}}
		if err := cp.Register("s", r, ""); err != nil {
			t.Fatal(err)
		}
		stop := startRun(t, cp)
		time.Sleep(testInterval + time.Millisecond)
		synctest.Wait()
		if got := cp.Stats().Shards["s"].Failures; got != 1 {
			t.Errorf("failures = %d, want 1", got)
		}
		if strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "level=INFO") {
			t.Errorf("a commit refused for a lost lease logged:\n%s\nwant INFO, no WARN", logs)
		}
		if err := stop(); !errors.Is(err, context.Canceled) {
			t.Errorf("Run = %v", err)
		}
	})
}

func TestCheckpointerPermanentFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLatestSeq()
		l.set("a", "1")
		l.set("b", "1")
		logs := &syncBuffer{}
		cp, err := New(Config{
			Interval:      testInterval,
			Latest:        l.get,
			CommitBackoff: time.Millisecond, // a round of 4 attempts fits in an interval
			Logger:        slog.New(slog.NewTextHandler(logs, nil)),
		})
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		failing := true
		r := &recorder{hook: func(_ context.Context, _ int, shard, _ string) error {
			mu.Lock()
			defer mu.Unlock()
			if failing && shard == "a" {
				return errors.New("service unavailable")
			}
			return nil
		}}
		for _, s := range []string{"a", "b"} {
			if err := cp.Register(s, r, ""); err != nil {
				t.Fatal(err)
			}
		}
		stop := startRun(t, cp)
		time.Sleep(3*testInterval + time.Millisecond) // three rounds
		synctest.Wait()
		st := cp.Stats()
		if got := st.Shards["a"].Failures; got < 2 {
			t.Errorf("shard a failures = %d, want >= 2", got)
		}
		if d := cmp.Diff(int64(1), st.Shards["b"].Commits); d != "" {
			t.Errorf("shard b commits (-want +got):\n%s", d)
		}
		if n := strings.Count(logs.String(), "commit failed"); n != 1 {
			t.Errorf("failure logged %d times, want once per streak:\n%s", n, logs)
		}
		mu.Lock()
		failing = false
		mu.Unlock()
		time.Sleep(testInterval)
		synctest.Wait()
		if n := strings.Count(logs.String(), "commits succeed again"); n != 1 {
			t.Errorf("recovery logged %d times, want 1:\n%s", n, logs)
		}
		if got := cp.Stats().Shards["a"].Committed; got != "1" {
			t.Errorf("shard a committed %q after recovery, want 1", got)
		}
		if err := stop(); !errors.Is(err, context.Canceled) {
			t.Errorf("Run = %v; a failing commit must not stop it", err)
		}
	})
}

// TestCheckpointerOutageWarnsOnce: commits failing on every shard (an
// outage of DynamoDB) are logged at WARN once, not once per shard (100
// WARNs for 100 shards before), and their end once at INFO, when every
// shard commits again; a shard removed while failing, which commits no
// more, does not hold the streak open, so the next outage warns again.
func TestCheckpointerOutageWarnsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 100
		l := newLatestSeq()
		logs := &syncBuffer{}
		cp, err := New(Config{
			Interval:      testInterval,
			Latest:        l.get,
			CommitBackoff: time.Millisecond,
			Logger:        slog.New(slog.NewTextHandler(logs, nil)),
		})
		if err != nil {
			t.Fatal(err)
		}
		r, outage := downRecorder()
		shard := func(i int) string { return fmt.Sprintf("shardId-%012d", i) }
		// setDown starts (d) or ends an outage; one starts with new
		// records on every shard, so each has a commit to make.
		seq := 100
		setDown := func(d bool) {
			outage(d)
			if d {
				seq++
				for i := range n {
					l.set(shard(i), strconv.Itoa(seq))
				}
			}
		}
		for i := range n {
			l.set(shard(i), "100")
			if err := cp.Register(shard(i), r, ""); err != nil {
				t.Fatal(err)
			}
		}
		stop := startRun(t, cp)
		defer func() {
			setDown(false)
			_ = stop()
		}()
		// count returns how many lines of level level say what.
		count := func(level, what string) int {
			c := 0
			for line := range strings.Lines(logs.String()) {
				if strings.Contains(line, "level="+level) && strings.Contains(line, what) {
					c++
				}
			}
			return c
		}
		// until sleeps rounds until every shard registered failed (down)
		// or committed (up) since the last call, at most 100 of them.
		var failures, commits int64
		until := func(up bool) {
			for range 100 {
				time.Sleep(testInterval)
				synctest.Wait()
				st := cp.Stats()
				f, c := st.Failures-failures, st.Commits-commits
				if (!up && f >= int64(len(st.Shards)-1)) || (up && c >= int64(len(st.Shards)-1)) {
					failures, commits = st.Failures, st.Commits
					return
				}
			}
			t.Errorf("the shards did not all %s in 100 rounds", map[bool]string{false: "fail", true: "commit"}[up])
		}
		until(false)
		until(false) // a second round of failures
		if w := count("WARN", "commit failed"); w != 1 {
			t.Errorf("an outage on %d shards logged %d WARNs, want 1:\n%s", n, w, logs)
		}
		setDown(false)
		until(true)
		if c := count("INFO", "commits succeed again"); c != 1 {
			t.Errorf("the outage's end logged %d INFO lines, want 1:\n%s", c, logs)
		}
		// A second outage, during which shard 0 is removed without a last
		// commit: the streak ends when the others commit again.
		setDown(true)
		until(false)
		if err := cp.Remove(t.Context(), shard(0), nil); err != nil {
			t.Fatal(err)
		}
		setDown(false)
		until(true)
		setDown(true)
		until(false)
		if w := count("WARN", "commit failed"); w != 3 {
			t.Errorf("three outages logged %d WARNs, want 3:\n%s", w, logs)
		}
		if c := count("INFO", "commits succeed again"); c != 2 {
			t.Errorf("two outages' ends logged %d INFO lines, want 2:\n%s", c, logs)
		}
	})
}

// downRecorder returns a recorder whose commits fail while DynamoDB is
// down, as it is at first, and the function that sets whether it is.
func downRecorder() (*recorder, func(down bool)) {
	var mu sync.Mutex
	isDown := true
	r := &recorder{hook: func(context.Context, int, string, string) error {
		mu.Lock()
		defer mu.Unlock()
		if isDown {
			return errors.New("service unavailable")
		}
		return nil
	}}
	return r, func(down bool) {
		mu.Lock()
		isDown = down
		mu.Unlock()
	}
}

func TestCheckpointerManyShards(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 500
		l := newLatestSeq()
		cp := newTestCheckpointer(t, l)
		r := &recorder{}
		for i := range n {
			shard := fmt.Sprintf("shardId-%012d", i)
			l.set(shard, "100")
			if err := cp.Register(shard, r, ""); err != nil {
				t.Fatal(err)
			}
		}
		stop := startRun(t, cp)
		time.Sleep(testInterval)
		synctest.Wait()
		for i := range n / 2 {
			l.set(fmt.Sprintf("shardId-%012d", i), "200")
		}
		time.Sleep(testInterval)
		synctest.Wait()
		st := cp.Stats()
		got := [3]int64{st.Commits, st.Skips, st.Failures}
		if d := cmp.Diff([3]int64{n + n/2, n / 2, 0}, got); d != "" {
			t.Errorf("commits, skips, failures (-want +got):\n%s", d)
		}
		_ = stop()
	})
}

func TestCheckpointerConcurrent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const shards, rounds = 8, 50
		l := newLatestSeq()
		cp := newTestCheckpointer(t, l)
		r := &recorder{}
		stop := startRun(t, cp)
		var wg sync.WaitGroup
		for i := range shards {
			shard := fmt.Sprintf("s%d", i)
			wg.Go(func() { // the shard's reader: stores ever higher numbers
				for n := range rounds {
					l.set(shard, fmt.Sprint(1000+n))
					time.Sleep(testInterval / 3)
				}
			})
			wg.Go(func() { // its lease: acquired and lost again and again
				for n := range rounds / 5 {
					// Taken again at the checkpoint the lease holds.
					if err := cp.Register(shard, r, r.lastOf(shard)); err != nil {
						t.Error(err)
					}
					time.Sleep(testInterval * 2)
					var final Committer
					if n%2 == 0 {
						final = r
					}
					if err := cp.Remove(context.Background(), shard, final); err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Go(func() {
			for range rounds {
				_ = cp.Stats()
				time.Sleep(testInterval)
			}
		})
		wg.Wait()
		_ = stop()
		last := map[string]string{}
		for _, c := range r.got() {
			if prev, ok := last[c.Shard]; ok && batch.CompareSeq(c.Seq, prev) <= 0 {
				t.Errorf("shard %s: committed %s after %s", c.Shard, c.Seq, prev)
			}
			last[c.Shard] = c.Seq
		}
		if len(last) != shards {
			t.Errorf("commits for %d shards, want %d", len(last), shards)
		}
	})
}

func TestCheckpointerClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLatestSeq()
		cp := newTestCheckpointer(t, l)
		r := &recorder{}
		for _, s := range []string{"a", "b"} {
			l.set(s, "1")
			if err := cp.Register(s, r, ""); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		runErr := make(chan error, 1)
		go func() { runErr <- cp.Run(ctx) }()
		time.Sleep(testInterval)
		synctest.Wait()
		l.set("a", "2")
		l.set("b", "2")
		if err := cp.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := <-runErr; err != nil {
			t.Errorf("Run after Close = %v, want nil", err)
		}
		got := r.got()
		if d := cmp.Diff(4, len(got)); d != "" {
			t.Fatalf("commits %v (-want +got):\n%s", got, d)
		}
		for _, c := range got[2:] {
			if c.Seq != "2" {
				t.Errorf("last round committed %v, want seq 2 for both shards", c)
			}
		}
		if err := cp.Close(context.Background()); err != nil {
			t.Errorf("second Close = %v, want nil", err)
		}
		if err := cp.Register("c", r, ""); !errors.Is(err, ErrClosed) {
			t.Errorf("Register after Close = %v, want ErrClosed", err)
		}
		time.Sleep(5 * testInterval)
		if n := len(r.got()); n != 4 {
			t.Errorf("%d commits after Close, want none", n-4)
		}
	})
}

func TestCheckpointerShardEnd(t *testing.T) {
	l := newLatestSeq()
	l.set("s", "5", "9")
	cp := newTestCheckpointer(t, l)
	r := &recorder{}
	if err := cp.Register("s", r, "3"); err != nil {
		t.Fatal(err)
	}
	if err := cp.fireShard(t.Context(), "s", cp.shards["s"]); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := cp.MarkShardEnd(t.Context(), "s", r); err != nil {
			t.Fatal(err)
		}
	}
	if err := cp.Remove(t.Context(), "s", r); err != nil {
		t.Fatal(err)
	}
	diffCalls(t, []call{{"s", "5"}, {"s", ShardEnd}}, r)
}

func TestCheckpointerRegisterFloor(t *testing.T) {
	tests := []struct {
		name      string
		committed string
		want      []call
	}{
		{"sequence number already stored", "150", []call{{"s", "200"}}},
		{"trim horizon", TrimHorizon, []call{{"s", "100"}, {"s", "200"}}},
		{"no checkpoint", "", []call{{"s", "100"}, {"s", "200"}}},
		{"finished shard", ShardEnd, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := newLatestSeq()
			l.set("s", "100", "200")
			cp := newTestCheckpointer(t, l)
			r := &recorder{}
			if err := cp.Register("s", r, tc.committed); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if err := cp.fireShard(t.Context(), "s", cp.shards["s"]); err != nil {
					t.Fatal(err)
				}
			}
			diffCalls(t, tc.want, r)
		})
	}
}

// TestCheckpointerRegisterAgainAfterRemove registers a shard a second time,
// after a Remove (a lease lost, refused or handed off, then taken again):
// the lease's checkpoint then is the one stored, even below the number
// the first hold registered or wrote. An operator who fixes a refused
// checkpoint (2^128-1, past every record) to TRIM_HORIZON gets checkpoints
// again, rather than none until the shard's numbers pass the refused one.
func TestCheckpointerRegisterAgainAfterRemove(t *testing.T) {
	const maxSeq = "340282366920938463463374607431768211455"
	tests := []struct {
		name   string
		first  string // the checkpoint registered first
		wrote  bool   // the first hold committed latest's first value
		second string // the checkpoint registered after the Remove
		want   []call
	}{
		{"refused checkpoint fixed to trim horizon", maxSeq, false, TrimHorizon, []call{{"s", "100"}, {"s", "200"}}},
		{"refused checkpoint fixed to a lower number", maxSeq, false, "50", []call{{"s", "100"}, {"s", "200"}}},
		{"checkpoint written, then set back", "", true, TrimHorizon, []call{{"s", "100"}, {"s", "100"}, {"s", "200"}}},
		{"taken back at the number written", "", true, "100", []call{{"s", "100"}, {"s", "200"}}},
		{"taken back after another worker's checkpoint", "", true, "150", []call{{"s", "100"}, {"s", "200"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := newLatestSeq()
			cp := newTestCheckpointer(t, l)
			r := &recorder{}
			if err := cp.Register("s", r, tc.first); err != nil {
				t.Fatal(err)
			}
			if tc.wrote {
				l.set("s", "100")
				if err := cp.fireShard(t.Context(), "s", cp.shards["s"]); err != nil {
					t.Fatal(err)
				}
			}
			if err := cp.Remove(t.Context(), "s", nil); err != nil {
				t.Fatal(err)
			}
			if err := cp.Register("s", r, tc.second); err != nil {
				t.Fatal(err)
			}
			l.set("s", "100", "200")
			for range 2 {
				if err := cp.fireShard(t.Context(), "s", cp.shards["s"]); err != nil {
					t.Fatal(err)
				}
			}
			diffCalls(t, tc.want, r)
		})
	}
}

func TestCheckpointerConfig(t *testing.T) {
	_, err := New(Config{Interval: -time.Second, CommitAttempts: -1})
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("New = %v, want ErrInvalidConfig", err)
	}
	for _, field := range []string{"Interval -1s", "Latest is nil", "CommitAttempts -1"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("error %q does not name %q", err, field)
		}
	}
}
