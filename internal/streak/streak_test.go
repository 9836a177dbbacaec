package streak_test

import (
	"cmp"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/streak"
)

// lockedBuffer is a strings.Builder safe for concurrent use, for logs.
type lockedBuffer struct {
	mu sync.Mutex
	sb strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sb.Write(p)
}

// warnings returns the attempts (or failed_attempts) of each line logged.
func (b *lockedBuffer) warnings() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var got []string
	for line := range strings.Lines(b.sb.String()) {
		for _, key := range []string{" attempts=", " failed_attempts="} {
			if _, v, ok := strings.Cut(line, key); ok {
				v, _, _ = strings.Cut(v, " ")
				got = append(got, strings.TrimSpace(key)+v)
			}
		}
	}
	return got
}

// TestSharedWarnsOncePerStep checks that calls failing at once through one
// Shared streak warn at 5, 10, 20... failed attempts in all, whichever call
// failed, that a call getting through ends the streak with one line, and
// that the next failure starts a new streak, warned at once if urgent.
func TestSharedWarnsOncePerStep(t *testing.T) {
	var logs lockedBuffer
	sh := streak.NewShared(streak.Streak{
		Logger: slog.New(slog.NewTextHandler(&logs, nil)), Clock: clock.NewManual(time.Unix(0, 0)),
		Prefix: "test", Service: "Test", Op: "write", Fix: func(string, string) string { return "fix it" },
	})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 5 {
				sh.Failed("throttled", false, nil)
			}
		})
	}
	wg.Wait()
	sh.Succeeded()
	sh.Succeeded() // no streak: nothing to say
	sh.Failed("timeout", true, nil)
	sh.Failed("timeout", true, nil) // warned already
	// Lines are logged outside the lock: those of calls failing at once
	// may come in any order.
	got := logs.warnings()
	if len(got) >= 4 {
		n := func(s string) int { _, v, _ := strings.Cut(s, "="); i, _ := strconv.Atoi(v); return i }
		slices.SortFunc(got[:4], func(a, b string) int { return cmp.Compare(n(a), n(b)) })
	}
	want := []string{"attempts=5", "attempts=10", "attempts=20", "attempts=40", "failed_attempts=40", "attempts=1"}
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("lines logged (-want +got):\n%s", diff)
	}
}
