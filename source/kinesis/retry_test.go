package kinesis

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/attempt"
)

func TestClassify(t *testing.T) {
	resp := func(code int) error {
		return &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: code}}, Err: errors.New("x")}
	}
	op := func(err error) error {
		return &smithy.OperationError{ServiceID: "Kinesis", OperationName: "GetRecords", Err: err}
	}
	tests := []struct {
		name string
		err  error
		want retryCause
	}{
		{"nil", nil, ""},
		{"throttled", op(&types.ProvisionedThroughputExceededException{}), causeThrottled},
		{"limit", op(&types.LimitExceededException{}), causeLimitExceeded},
		{"kms", op(&types.KMSThrottlingException{}), causeKMSThrottling},
		{"internal failure", op(&types.InternalFailureException{}), causeServerError},
		{"503", op(resp(503)), causeServerError},
		{"400", op(resp(400)), ""},
		{"send", op(&smithyhttp.RequestSendError{Err: errors.New("connection reset")}), causeTransport},
		{"truncated", op(&smithy.DeserializationError{Err: io.ErrUnexpectedEOF}), causeTransport},
		{"eof", fmt.Errorf("read: %w", io.EOF), causeTransport},
		{"expired iterator", op(&types.ExpiredIteratorException{}), ""},
		{"not found", op(&types.ResourceNotFoundException{}), ""},
		{"canceled", op(&smithyhttp.RequestSendError{Err: context.Canceled}), ""},
		{"http timeout", op(context.DeadlineExceeded), causeTimeout},
		{"408 unmodeled", op(apiResp(408, &smithy.GenericAPIError{Code: "UnknownError"})), causeTimeout},
		{"RequestTimeoutException", op(apiResp(400, &smithy.GenericAPIError{Code: "RequestTimeoutException"})), causeTimeout},
		{"attempt timeout", fmt.Errorf("no answer (%w): %w", attempt.ErrTimeout, op(&smithy.CanceledError{Err: context.Canceled})), causeTimeout},
		{"429 unmodeled", op(apiResp(429, &smithy.GenericAPIError{Code: "UnknownError"})), causeThrottled},
		{"ThrottlingException", op(apiResp(400, &smithy.GenericAPIError{Code: "ThrottlingException"})), causeThrottled},
		{"502", op(apiResp(502, &smithy.GenericAPIError{Code: "BadGateway"})), causeServerError},
		{"expired token", op(apiResp(400, &smithy.GenericAPIError{Code: "ExpiredTokenException"})), causeExpiredCredentials},
		{"connection reset", op(&smithyhttp.RequestSendError{Err: &net.OpError{Op: "read", Err: syscall.ECONNRESET}}), causeTransport},
		{"net timeout", op(&net.OpError{Op: "read", Err: timeoutErr{}}), causeTimeout},
		{"no such host", op(&smithyhttp.RequestSendError{Err: &net.DNSError{Err: "no such host", Name: "x.invalid", IsNotFound: true}}), ""},
		{"access denied", op(apiResp(400, &types.AccessDeniedException{})), ""},
		{"unrecognized client", op(apiResp(400, &smithy.GenericAPIError{Code: "UnrecognizedClientException"})), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := classify(tt.err); got != tt.want {
				t.Errorf("classify(%v) = %q, want %q", tt.err, got, tt.want)
			}
		})
	}
}

// apiResp is an API error answered with an HTTP status, as the SDK builds it.
func apiResp(code int, err error) error {
	return &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: code}}, Err: err}
}

// timeoutErr is a network timeout.
type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestWithFixNamesTheFix(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{apiResp(400, &types.AccessDeniedException{}), "kinesis:GetRecords"},
		{apiResp(400, &types.KMSAccessDeniedException{}), "kms:Decrypt"},
		{apiResp(400, &types.ResourceNotFoundException{}), "Config.Stream"},
		{apiResp(400, &smithy.GenericAPIError{Code: "UnrecognizedClientException"}), "Config.AWS"},
		{&net.DNSError{Err: "no such host", Name: "x.invalid", IsNotFound: true}, "Config.Endpoint"},
	}
	for _, tt := range tests {
		err := withFix("GetRecords", tt.err)
		if !errors.Is(err, tt.err) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("withFix(%v) = %v, want it to wrap the error and mention %q", tt.err, err, tt.want)
		}
	}
	if err := errors.New("x"); withFix("GetRecords", err) != err {
		t.Error("withFix changed an error it has no fix for")
	}
}

func TestDoRetriesRetryableErrorsAndCountsThem(t *testing.T) {
	throttled := &types.ProvisionedThroughputExceededException{}
	tests := []struct {
		name        string
		errs        []error // returned by successive calls; then success
		maxAttempts int
		wantErr     error
		wantCalls   int
		wantRetries map[retryCause]int64
	}{
		{name: "success", wantCalls: 1},
		{
			name:      "throttled then 5xx then ok",
			errs:      []error{throttled, throttled, &types.InternalFailureException{}},
			wantCalls: 4, wantRetries: map[retryCause]int64{causeThrottled: 2, causeServerError: 1},
		},
		{
			name:      "not retryable",
			errs:      []error{&types.InvalidArgumentException{}},
			wantErr:   &types.InvalidArgumentException{},
			wantCalls: 1,
		},
		{
			name:        "attempts exhausted",
			errs:        []error{throttled, throttled, throttled, throttled},
			maxAttempts: 3, wantErr: throttled, wantCalls: 3,
			wantRetries: map[retryCause]int64{causeThrottled: 2},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				stats := &statsCollector{}
				r := &retrier{clock: clock.Real{}, base: 100 * time.Millisecond, max: time.Second, stats: stats, logger: slog.New(slog.DiscardHandler)}
				calls := 0
				start := time.Now()
				v, err := do(t.Context(), r, tt.maxAttempts, "op", "shard", func(context.Context) (int, error) {
					calls++
					if calls <= len(tt.errs) {
						return 0, tt.errs[calls-1]
					}
					return 42, nil
				})
				if tt.wantErr != nil {
					if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr.Error()) { // and a fix after it
						t.Fatalf("do: error %v, want %v", err, tt.wantErr)
					}
				} else if err != nil || v != 42 {
					t.Fatalf("do = %d, %v; want 42, nil", v, err)
				}
				if calls != tt.wantCalls {
					t.Errorf("calls = %d, want %d", calls, tt.wantCalls)
				}
				if diff := cmp.Diff(causeCounts(tt.wantRetries, true), stats.snapshot().Retries); diff != "" {
					t.Errorf("retries (-want +got):\n%s", diff)
				}
				if retries := calls - 1; retries > 0 && time.Since(start) < 50*time.Millisecond {
					t.Errorf("%d retries took %v of virtual time: no back-off", retries, time.Since(start))
				}
			})
		})
	}
}

func TestDoStopsWaitingWhenContextIsDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		r := &retrier{clock: clock.Real{}, base: time.Hour, max: time.Hour, stats: &statsCollector{}, logger: slog.New(slog.DiscardHandler)}
		errc := make(chan error, 1)
		go func() {
			_, err := do(ctx, r, 0, "op", "", func(context.Context) (int, error) {
				return 0, &types.LimitExceededException{}
			})
			errc <- err
		}()
		synctest.Wait()
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Errorf("do: %v, want context.Canceled", err)
		}
	})
}

func TestDoTimesOutASilentAttemptAndRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stats := &statsCollector{}
		r := &retrier{clock: clock.Real{}, base: 100 * time.Millisecond, max: time.Second, timeout: 10 * time.Second, stats: stats, logger: slog.New(slog.DiscardHandler)}
		calls := 0
		start := time.Now()
		var silentFor time.Duration
		v, err := do(t.Context(), r, 0, "GetRecords", "shard", func(ctx context.Context) (int, error) {
			calls++
			if calls == 1 { // a connection that never answers
				<-ctx.Done()
				silentFor = time.Since(start)
				return 0, &smithy.CanceledError{Err: ctx.Err()}
			}
			return 42, nil
		})
		if err != nil || v != 42 {
			t.Fatalf("do = %d, %v; want 42, nil", v, err)
		}
		if silentFor != 10*time.Second {
			t.Errorf("the silent attempt was abandoned after %v, want the attempt timeout, 10s", silentFor)
		}
		if diff := cmp.Diff(causeCounts(map[retryCause]int64{causeTimeout: 1}, true), stats.snapshot().Retries); diff != "" {
			t.Errorf("retries (-want +got):\n%s", diff)
		}
	})
}

func TestDoRefreshesExpiredCredentials(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		refreshed := 0
		r := &retrier{clock: clock.Real{}, base: time.Millisecond, max: time.Millisecond, stats: &statsCollector{}, logger: slog.New(slog.DiscardHandler),
			refresh: func() { refreshed++ }}
		calls := 0
		_, err := do(t.Context(), r, 0, "GetRecords", "shard", func(context.Context) (int, error) {
			calls++
			if refreshed == 0 {
				return 0, apiResp(400, &smithy.GenericAPIError{Code: "ExpiredTokenException"})
			}
			return 1, nil
		})
		if err != nil || calls != 2 || refreshed != 1 {
			t.Errorf("do: err %v after %d calls and %d refreshes; want nil after 2 calls and 1 refresh", err, calls, refreshed)
		}
	})
}
