package kinesis

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/source"
)

// logged is a slog.Handler that keeps the records at WARN and above, with
// the virtual time they were logged at.
type logged struct {
	mu   sync.Mutex
	recs []loggedRecord
}

type loggedRecord struct {
	at    time.Time
	msg   string
	attrs map[string]string
}

func (h *logged) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (h *logged) WithAttrs([]slog.Attr) slog.Handler           { return h }
func (h *logged) WithGroup(string) slog.Handler                { return h }
func (h *logged) Handle(_ context.Context, r slog.Record) error {
	rec := loggedRecord{at: time.Now(), msg: r.Message, attrs: map[string]string{}}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.String()
		return true
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = append(h.recs, rec)
	return nil
}

func (h *logged) records() []loggedRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]loggedRecord(nil), h.recs...)
}

func TestDoWarnsOnRetryStreaks(t *testing.T) {
	refused := &smithyhttp.RequestSendError{Err: errors.New("dial tcp 127.0.0.1:1: connect: connection refused")}
	throttled := &types.ProvisionedThroughputExceededException{}
	tests := []struct {
		name string
		errs []error // returned by successive calls; then success
		// want is, per WARN logged: its attempts attribute ("" for the
		// line saying the streak is over) and cause.
		want [][2]string
	}{
		{name: "one throttle is normal", errs: []error{throttled}},
		{name: "four throttles are quiet", errs: []error{throttled, throttled, throttled, throttled}},
		{
			// Its end is logged once the shard's calls go unthrottled
			// for a minute: see TestThrottlingWarnedOncePerEpisode.
			name: "a throttling streak warns once, at 5, as a throttling episode",
			errs: []error{throttled, throttled, throttled, throttled, throttled, throttled, throttled, throttled, throttled, throttled, throttled},
			want: [][2]string{{"", "throttled"}},
		},
		{
			name: "an unreachable endpoint warns at once",
			errs: []error{refused, refused},
			want: [][2]string{{"1", "transport"}, {"", ""}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := &logged{}
				r := &retrier{clock: clock.Real{}, base: 100 * time.Millisecond, max: time.Second, stats: &statsCollector{}, logger: slog.New(h), endpoint: "http://127.0.0.1:1"}
				calls := 0
				if _, err := do(t.Context(), r, 0, "GetRecords", "shard-0", func(context.Context) (int, error) {
					calls++
					if calls <= len(tt.errs) {
						return 0, tt.errs[calls-1]
					}
					return 1, nil
				}); err != nil {
					t.Fatal(err)
				}
				var got [][2]string
				for _, rec := range h.records() {
					got = append(got, [2]string{rec.attrs["attempts"], rec.attrs["cause"]})
					if rec.attrs["endpoint"] != "http://127.0.0.1:1" || rec.attrs["shard"] != "shard-0" {
						t.Errorf("warning %q lacks the endpoint or shard: %v", rec.msg, rec.attrs)
					}
					if rec.attrs["cause"] != "" && rec.attrs["fix"] == "" {
						t.Errorf("warning %q names no fix: %v", rec.msg, rec.attrs)
					}
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("warnings (attempts, cause) (-want +got):\n%s", diff)
				}
			})
		})
	}
}

// refusingClient fails every call as an unreachable endpoint does.
type refusingClient struct{ Client }

func (refusingClient) DescribeStreamSummary(context.Context, *awskinesis.DescribeStreamSummaryInput, ...func(*awskinesis.Options)) (*awskinesis.DescribeStreamSummaryOutput, error) {
	return nil, &smithyhttp.RequestSendError{Err: errors.New("dial tcp 127.0.0.1:1: connect: connection refused")}
}

// TestStartWarnsAtOnceWhenKinesisIsUnreachable checks that a receiver that
// cannot reach Kinesis at start-up says so at WARN before its first
// back-off, naming the endpoint and how long it keeps trying, instead of
// retrying silently until its attempts run out.
func TestStartWarnsAtOnceWhenKinesisIsUnreachable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &logged{}
		r, err := New(Config{Stream: "words", App: "app", Client: refusingClient{}, Endpoint: "http://127.0.0.1:1", Logger: slog.New(h)})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		errc := make(chan error, 1)
		go func() {
			errc <- r.Start(t.Context(), source.Runtime[Record]{Push: func(context.Context, source.Block[Record]) (batch.BlockInfo, error) {
				return batch.BlockInfo{}, nil
			}})
		}()
		synctest.Wait()
		recs := h.records()
		if len(recs) == 0 {
			t.Fatal("no WARN logged at once for an unreachable endpoint")
		}
		if d := recs[0].at.Sub(start); d != 0 {
			t.Errorf("first warning after %v, want at once", d)
		}
		// refusingClient ignores Config.Endpoint and shows no options.
		if recs[0].attrs["endpoint"] != "the given Client" || recs[0].attrs["cause"] != "transport" {
			t.Errorf("first warning %q: %v, want endpoint and cause transport", recs[0].msg, recs[0].attrs)
		}
		if err := <-errc; err == nil {
			t.Error("Start returned nil for an unreachable endpoint")
		}
		t.Logf("gave up after %v of virtual time: %s %v", time.Since(start), recs[0].msg, recs[0].attrs)
	})
}
