package checkpointer

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/smithy-go"
)

// TestOwnFailureDoesNotHideOutage: one shard whose commits fail for a
// reason of its own (a conditional check on its lease alone) must not hide
// a later outage of the other shards. Before, the outage's failures were
// logged at DEBUG until that shard committed: the streak was one for all
// shards. Failures are grouped by kind (the error code): the outage, of
// another kind, is warned about once, its end logged at INFO while the
// shard's own failures go on, and the next outage warned about again.
func TestOwnFailureDoesNotHideOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
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
		var mu sync.Mutex
		down := false
		r := &recorder{hook: func(_ context.Context, _ int, shard, _ string) error {
			mu.Lock()
			defer mu.Unlock()
			switch {
			case shard == "a":
				return &smithy.GenericAPIError{Code: "ConditionalCheckFailedException", Message: "The conditional request failed"}
			case down:
				return &smithy.GenericAPIError{Code: "ServiceUnavailable", Message: "down", Fault: smithy.FaultServer}
			}
			return nil
		}}
		seq := 100
		// phase sets whether the other shards' commits fail, gives every
		// shard a new number to commit and lets three intervals pass.
		phase := func(d bool) {
			mu.Lock()
			down = d
			mu.Unlock()
			seq++
			for _, s := range []string{"a", "b", "c"} {
				l.set(s, strconv.Itoa(seq))
			}
			time.Sleep(3 * testInterval)
			synctest.Wait()
		}
		for _, s := range []string{"a", "b", "c"} {
			l.set(s, "100")
			if err := cp.Register(s, r, ""); err != nil {
				t.Fatal(err)
			}
		}
		stop := startRun(t, cp)
		defer func() { _ = stop() }()
		count := func(level, what string) int {
			c := 0
			for line := range strings.Lines(logs.String()) {
				if strings.Contains(line, "level="+level) && strings.Contains(line, what) {
					c++
				}
			}
			return c
		}
		phase(false) // shard a fails alone
		if w := count("WARN", "commit failed"); w != 1 {
			t.Fatalf("shard a failing alone: %d WARNs, want 1:\n%s", w, logs)
		}
		phase(true) // an outage of the others
		if w := count("WARN", "ServiceUnavailable"); w != 1 {
			t.Fatalf("an outage of shards b and c while shard a fails for its own reason: %d WARNs naming it, want 1:\n%s", w, logs)
		}
		phase(false)
		if c := count("INFO", "commits succeed again"); c != 1 {
			t.Errorf("the outage's end, shard a failing on: %d INFO lines, want 1:\n%s", c, logs)
		}
		phase(true)
		if w := count("WARN", "commit failed"); w != 3 {
			t.Errorf("shard a's failures and two outages: %d WARNs, want 3:\n%s", w, logs)
		}
	})
}
