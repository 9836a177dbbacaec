package kinesis

import (
	"testing"
	"time"

	"github.com/weirstream/weir/internal/localaws/faults"
)

// TestTransientAnswersDoNotStopTheReceiver injects, against kinesalite, the
// answers that once stopped a receiver: a single HTTP 408 on one GetRecords,
// a long hang that ends in 408, and a connection that goes silent until the
// attempt timeout. Each is retried; every record arrives once.
func TestTransientAnswersDoNotStopTheReceiver(t *testing.T) {
	tests := []struct {
		name           string
		rule           faults.Rule
		attemptTimeout time.Duration
		cause          retryCause
	}{
		{"one 408", faults.Rule{Operation: "GetRecords", Kind: faults.RequestTimeout, Skip: 2, Times: 1}, 0, causeTimeout},
		{"hang then 408", faults.Rule{Operation: "GetRecords", Kind: faults.RequestTimeout, Skip: 2, Times: 1, Delay: 300 * time.Millisecond}, 0, causeTimeout},
		{"silent connection", faults.Rule{Operation: "GetRecords", Kind: faults.Hang, Skip: 2, Times: 2}, 100 * time.Millisecond, causeTimeout},
		{"silent GetShardIterator", faults.Rule{Operation: "GetShardIterator", Kind: faults.Hang, Times: 1}, 100 * time.Millisecond, causeTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := servers.Env(t)
			stream := newStream(t, env, 1)
			data := payloads("t", 300)
			if err := env.PutRecords(t.Context(), stream, data, nil); err != nil {
				t.Fatal(err)
			}
			tr, err := faults.New(faults.Config{Rules: []faults.Rule{tt.rule}})
			if err != nil {
				t.Fatal(err)
			}
			cfg := baseConfig(env, stream)
			cfg.AWS.HTTPClient = tr
			cfg.RecordsPerRead = 50
			cfg.AttemptTimeout = tt.attemptTimeout
			run := startReceiver(t, cfg, len(data))
			run.wait(t)
			run.stop(t)
			checkExactlyOnce(t, data, run.c.records())
			if n := tr.Injected("", 0); n != max(tt.rule.Times, 1) {
				t.Errorf("%d faults injected, want %d", n, tt.rule.Times)
			}
			if got := run.r.Stats().Retries[string(tt.cause)]; got < int64(tt.rule.Times) { // more: a slow answer under load also times out
				t.Errorf("Retries[%s] = %d, want at least %d (all: %v)", tt.cause, got, tt.rule.Times, run.r.Stats().Retries)
			}
		})
	}
}
