package kinesis

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestMalformedAggregatesLoggedWhenCountDoubles checks, on kinesalite,
// that records that start like KPL aggregates but are not one are each
// delivered as they are, counted, and logged when a shard's count
// doubles, not once per record: a producer writing such records would
// otherwise flood the log.
func TestMalformedAggregatesLoggedWhenCountDoubles(t *testing.T) {
	env := servers.Env(t)
	stream := newStream(t, env, 1)
	data := make([][]byte, 100)
	for i := range data {
		data[i] = fmt.Appendf([]byte("\xF3\x89\x9A\xC2"), "only the magic number of a KPL aggregate, then this: %03d", i)
	}
	if err := env.PutRecords(t.Context(), stream, data, nil); err != nil {
		t.Fatal(err)
	}
	h := &logged{}
	cfg := baseConfig(env, stream)
	cfg.Logger = slog.New(h)
	cfg.RecordsPerRead = 3 // pages of a few records: several counts to log
	// kinesalite has no read limit: 34 pages need not take 34 times the
	// default 200ms.
	cfg.MinReadInterval = time.Millisecond
	run := startReceiver(t, cfg, len(data))
	run.wait(t)
	run.stop(t)
	checkExactlyOnce(t, data, run.c.records())
	var warned []string
	for _, rec := range h.records() {
		if strings.Contains(rec.msg, "KPL aggregate") {
			warned = append(warned, rec.attrs["malformed"])
		}
	}
	t.Logf("warned at counts %v", warned)
	if len(warned) == 0 || len(warned) > 7 {
		t.Errorf("%d warnings for %d malformed aggregates, want one each time the count doubles (at most 7)", len(warned), len(data))
	}
	if got := run.r.Stats().MalformedAggregates; got != int64(len(data)) {
		t.Errorf("Stats.MalformedAggregates %d, want %d", got, len(data))
	}
}
