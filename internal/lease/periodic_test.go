package lease

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/weirstream/weir/internal/localaws"
)

// recordLog is a slog.Handler that keeps the level and message of every
// record, for counting.
type recordLog struct {
	mu    sync.Mutex
	lines []logLine
}

type logLine struct {
	level slog.Level
	msg   string
	fix   bool // it has a "fix" attribute
}

func (h *recordLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *recordLog) WithGroup(string) slog.Handler            { return h }
func (h *recordLog) Handle(_ context.Context, r slog.Record) error {
	l := logLine{level: r.Level, msg: r.Message}
	r.Attrs(func(a slog.Attr) bool {
		l.fix = l.fix || a.Key == "fix"
		return true
	})
	h.mu.Lock()
	h.lines = append(h.lines, l)
	h.mu.Unlock()
	return nil
}

// count returns how many lines were kept so far.
func (h *recordLog) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.lines)
}

// after returns the lines kept after the first from, at level or above.
func (h *recordLog) after(from int, level slog.Level) []logLine {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []logLine
	for _, l := range h.lines[from:] {
		if l.level >= level {
			out = append(out, l)
		}
	}
	return out
}

// TestLeaseTableOutageWarnsOncePerCall checks that a lease table failing
// every call for many periods (DynamoDB throttled or unreachable) is
// warned about once per kind of call, each warning naming the fix, not at
// every period for as long as it lasts (before, the scan and the read of
// the beat board each logged a WARN every take cycle, one every 3.3 s
// with the default lease duration), and that the end of it is said once
// the calls succeed again.
func TestLeaseTableOutageWarnsOncePerCall(t *testing.T) {
	ctx := t.Context()
	logs := &recordLog{}
	db := &faultDB{DynamoDBAPI: servers.Env(t).DynamoDB()}
	w := newWorker(t, localaws.UniqueName(t), "w", db, func(c *CoordinatorConfig) { c.Logger = slog.New(logs) })
	takeAll(t, w, shardIDs(2))
	from := logs.count() // not the take's warning of the manual clock's skew
	db.setRule(func(string, string) fault { return failBefore })
	const periods = 30 // 100 s: ten lease durations
	for range periods {
		w.clk.Advance(w.c.cfg.RenewInterval)
		w.cycle(ctx)
	}
	if n := len(w.c.Held()); n != 0 {
		t.Fatalf("%d leases held after %d periods of failed calls, want none", n, periods)
	}
	warned := make(map[string]int)
	for _, l := range logs.after(from, slog.LevelWarn) {
		warned[l.msg]++
		if !l.fix && warned[l.msg] == 1 {
			t.Errorf("warning %q has no fix attribute", l.msg)
		}
	}
	scanWarned := false
	for msg, n := range warned {
		scanWarned = scanWarned || strings.Contains(msg, "lease scan failed")
		if n > 1 {
			t.Errorf("warned %d times in %d periods of a failing lease table: %q; want once", n, periods, msg)
		}
	}
	if !scanWarned {
		t.Errorf("no warning of the failing lease scan; warnings: %v", warned)
	}

	db.setRule(nil)
	for range 2 {
		w.clk.Advance(w.c.cfg.RenewInterval)
		w.cycle(ctx)
	}
	if n := len(w.c.Held()); n != 2 {
		t.Errorf("%d leases held once the lease table answers again, want 2", n)
	}
	again := false
	for _, l := range logs.after(from, slog.LevelInfo) {
		again = again || l.msg == "leasetable: lease scan succeeds again after failing"
	}
	if !again {
		t.Error("no line saying the lease scan succeeds again")
	}
}
