package dynamodb_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/localaws/faults"
	"github.com/weirstream/weir/sink/dynamodb"
)

// TestThrottlingAndLostAnswersRetried checks, against dynalite behind a
// fault-injecting HTTP client and with the SDK's own retries off, that
// throttled writes (ProvisionedThroughputExceededException), writes never
// sent (a reset connection) and writes applied whose answer was lost (a
// response cut half way) are retried until DynamoDB answers, and that each
// is applied once: a lost answer's retry finds the write applied and is
// skipped.
func TestThrottlingAndLostAnswersRetried(t *testing.T) {
	t.Parallel()
	env := servers.Env(t)
	setup := env.DynamoDB()
	table := createTable(t, setup)
	tr, err := faults.New(faults.Config{Seed: 7, Rules: []faults.Rule{
		{Operation: "UpdateItem", Kind: faults.Throughput, Probability: 0.2, Times: 10},
		{Operation: "PutItem", Kind: faults.Throughput, Times: 2},
		{Operation: "UpdateItem", Kind: faults.DropRequest, Times: 3},
		{Operation: "UpdateItem", Kind: faults.DropResponse, Skip: 5, Times: 4},
	}})
	if err != nil {
		t.Fatal(err)
	}
	c := env.DynamoDB(func(o *ddb.Options) { o.HTTPClient, o.Retryer = tr, aws.NopRetryer{} })
	ctx := t.Context()
	s := newSink(t, ctx, dynamodb.Config{Client: c, Table: table, Concurrency: 4})
	b := batch.New(1_700_000_000_000, nil, events(60, 9, true))
	if err := s.Write(ctx, b); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(apply(nil, b.Records()...), scan(t, setup, table)); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
	injected := tr.Injected("", 0)
	cut := tr.Injected("UpdateItem", faults.DropResponse)
	if injected < 10 || cut != 4 {
		t.Fatalf("%d faults injected, %d responses cut; want at least 10 and 4", injected, cut)
	}
	// Each fault cost one retry. A write whose answer was cut is skipped
	// when retried, unless that retry's answer was cut too.
	st := s.Stats()
	if st.Written+st.Skipped != int64(b.Len()) || st.Skipped < 1 || st.Skipped > int64(cut) || st.Retried != int64(injected) {
		t.Errorf("Stats %+v: want %d written or skipped, 1 to %d skipped, %d retried", st, b.Len(), cut, injected)
	}
}

// writeHeld writes a batch of items distinct items with a Sink of
// concurrency writes at once, to dynalite behind a fault-injecting HTTP
// client that holds the first held UpdateItem calls silent. The call
// timeout and the waits before retries run on a manual clock, advanced
// once every held call is in: a call slowed by a loaded machine never
// times out. It checks that every item landed once, and returns the
// Sink's Stats and its log.
func writeHeld(t *testing.T, concurrency, items, held int) (dynamodb.Stats, string) {
	t.Helper()
	env := servers.Env(t)
	setup := env.DynamoDB()
	table := createTable(t, setup)
	tr, err := faults.New(faults.Config{Rules: []faults.Rule{{Operation: "UpdateItem", Kind: faults.Hang, Times: held}}})
	if err != nil {
		t.Fatal(err)
	}
	c := env.DynamoDB(func(o *ddb.Options) { o.HTTPClient, o.Retryer = tr, aws.NopRetryer{} })
	ctx := t.Context()
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	var logs safeBuffer
	s := newSink(t, ctx, dynamodb.Config{Client: c, Table: table, Concurrency: concurrency, Clock: clk, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	const timeout = 100 * time.Millisecond
	dynamodb.SetCallTimeout(s, timeout)
	b := batch.New(1_700_000_000_000, nil, events(items, items, false))
	done := make(chan error, 1)
	go func() { done <- s.Write(ctx, b) }()
	if err := tr.WaitInjected(ctx, "UpdateItem", faults.Hang, held); err != nil {
		t.Fatal(err)
	}
	clk.Advance(timeout)                                  // the held calls time out
	if err := clk.WaitForWaiters(ctx, held); err != nil { // the waits before their retries
		t.Fatal(err)
	}
	clk.Advance(5 * time.Second) // the longest wait before a retry
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := tr.Injected("UpdateItem", faults.Hang); n != held {
		t.Fatalf("%d UpdateItem calls held, want %d", n, held)
	}
	if diff := cmp.Diff(apply(nil, b.Records()...), scan(t, setup, table)); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
	return s.Stats(), logs.String()
}

// TestSilentCallRetried checks that a write whose request gets no answer
// (held silent) is abandoned after the call timeout and retried, and lands
// once, the call logged at WARN at once, naming the endpoint and the fix.
func TestSilentCallRetried(t *testing.T) {
	t.Parallel()
	// One write in flight: advancing the clock times out the held one only.
	st, text := writeHeld(t, 1, 5, 1)
	if st.Retried != 1 || st.Written != 5 {
		t.Errorf("Stats %+v, want 5 written, 1 retried", st)
	}
	if !strings.Contains(text, "level=WARN") || !strings.Contains(text, "cause=timeout") || !strings.Contains(text, "does not answer") {
		t.Errorf("want a WARN of the call with no answer, naming the fix:\n%s", text)
	}
}

// TestSilentCallsWarnedOnce checks that concurrent writes whose calls all
// get no answer (DynamoDB unreachable) log one WARN between them, not one
// each: with the default Concurrency an outage would log 16 lines at once.
func TestSilentCallsWarnedOnce(t *testing.T) {
	t.Parallel()
	const writes = 4
	_, text := writeHeld(t, writes, writes, writes)
	if n := strings.Count(text, "cause=timeout"); n != 1 {
		t.Errorf("%d WARN lines of calls with no answer from %d writes at once, want 1:\n%s", n, writes, text)
	}
}

// TestTransactionConflictRetried checks, against dynalite behind a
// fault-injecting HTTP client, that a write DynamoDB rejects with
// TransactionConflictException (the item is held by another writer's
// ongoing TransactWriteItems: nothing was applied, and the transaction
// ends) is retried until it lands, rather than failing the batch and
// stopping the pipeline.
func TestTransactionConflictRetried(t *testing.T) {
	t.Parallel()
	env := servers.Env(t)
	setup := env.DynamoDB()
	table := createTable(t, setup)
	tr, err := faults.New(faults.Config{Rules: []faults.Rule{
		{Operation: "UpdateItem", Kind: faults.TransactionConflict, Times: 3},
		{Operation: "PutItem", Kind: faults.TransactionConflict, Times: 2},
	}})
	if err != nil {
		t.Fatal(err)
	}
	c := env.DynamoDB(func(o *ddb.Options) { o.HTTPClient = tr })
	ctx := t.Context()
	s := newSink(t, ctx, dynamodb.Config{Client: c, Table: table, Concurrency: 2})
	b := batch.New(1_700_000_000_000, nil, events(12, 4, true))
	if err := s.Write(ctx, b); err != nil {
		t.Fatalf("Write with writes in conflict with a transaction: %v", err)
	}
	if diff := cmp.Diff(apply(nil, b.Records()...), scan(t, setup, table)); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
	if st := s.Stats(); st.Written != int64(b.Len()) || st.Retried != 5 {
		t.Errorf("Stats %+v: want %d written, 5 retried", st, b.Len())
	}
}

// TestNewSilentDescribeTable checks, against dynalite behind a
// fault-injecting HTTP client, that New does not hang on a DynamoDB that
// never answers its DescribeTable: each call is abandoned after the call
// timeout and tried again after a back-off, with a warning naming the
// endpoint at once, and New gives up after describeAttempts calls with an
// error naming the fix; a DynamoDB that answers again meanwhile is used.
// The timeouts and waits run on a manual clock, advanced once a call is
// held.
func TestNewSilentDescribeTable(t *testing.T) {
	t.Parallel()
	env := servers.Env(t)
	table := createTable(t, env.DynamoDB())
	for _, tc := range []struct {
		name    string
		silent  int
		wantErr bool
	}{{"silent once", 1, false}, {"silent for good", dynamodb.DescribeAttempts, true}} {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := faults.New(faults.Config{Rules: []faults.Rule{{Operation: "DescribeTable", Kind: faults.Hang, Times: tc.silent}}})
			if err != nil {
				t.Fatal(err)
			}
			c := env.DynamoDB(func(o *ddb.Options) { o.HTTPClient, o.Retryer = tr, aws.NopRetryer{} })
			ctx := t.Context()
			clk := clock.NewManual(time.Unix(1_700_000_000, 0))
			var logs safeBuffer
			cfg := dynamodb.Config{Client: c, Table: table, Clock: clk, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
			done := make(chan error, 1)
			go func() {
				_, err := dynamodb.New(ctx, cfg, toWrite)
				done <- err
			}()
			for i := 1; i <= tc.silent; i++ {
				if err := tr.WaitInjected(ctx, "DescribeTable", faults.Hang, i); err != nil {
					t.Fatal(err)
				}
				clk.Advance(5 * time.Second) // the held call times out
				if i == dynamodb.DescribeAttempts {
					break // New gives up
				}
				if err := clk.WaitForWaiters(ctx, 1); err != nil { // the wait before the next call
					t.Fatal(err)
				}
				clk.Advance(5 * time.Second) // the longest wait before a retry
			}
			err = <-done
			switch {
			case !tc.wantErr && err != nil:
				t.Fatalf("New after a silent DescribeTable: %v", err)
			case tc.wantErr && (err == nil || !strings.Contains(err.Error(), "fix: DynamoDB at ")):
				t.Fatalf("New with a DescribeTable never answered: error %v, want one naming the fix", err)
			}
			if text := logs.String(); !strings.Contains(text, "level=WARN") || !strings.Contains(text, "DescribeTable") {
				t.Errorf("no warning naming DescribeTable:\n%s", text)
			}
		})
	}
}

// safeBuffer is a bytes.Buffer safe for concurrent use, for logs.
type safeBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *safeBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *safeBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestThrottledPastCallTimeoutWarnsThrottling checks, against dynalite
// behind a fault-injecting HTTP client and with the SDK's own retryer, that
// a write throttled (ProvisionedThroughputExceededException) until the
// client's retries outlast the call timeout, as its back-off does under
// sustained throttling (the SDK then reports only the cancelled wait, not
// the throttling), is warned of as DynamoDB answering with errors its
// client retries, naming the capacity as the likely fix, not as a DynamoDB
// that does not answer; and that it lands once. The SDK's back-off waits
// an hour, so the call timeout, on a manual clock advanced once the SDK
// waits, always ends it there.
func TestThrottledPastCallTimeoutWarnsThrottling(t *testing.T) {
	t.Parallel()
	env := servers.Env(t)
	setup := env.DynamoDB()
	table := createTable(t, setup)
	const throttled = 5 // streak.WarnAt: the attempt that warns
	tr, err := faults.New(faults.Config{Rules: []faults.Rule{{Operation: "UpdateItem", Kind: faults.Throughput, Times: throttled}}})
	if err != nil {
		t.Fatal(err)
	}
	waiting := make(chan struct{}, throttled)
	retryer := retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = 3
		o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) {
			waiting <- struct{}{}
			return time.Hour, nil
		})
	})
	c := env.DynamoDB(func(o *ddb.Options) { o.HTTPClient, o.Retryer = tr, retryer })
	ctx := t.Context()
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	var logs safeBuffer
	s := newSink(t, ctx, dynamodb.Config{Client: c, Table: table, Concurrency: 1, Clock: clk, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	const timeout = 100 * time.Millisecond
	dynamodb.SetCallTimeout(s, timeout)
	b := batch.New(1_700_000_000_000, nil, events(1, 1, false))
	done := make(chan error, 1)
	go func() { done <- s.Write(ctx, b) }()
	for range throttled {
		<-waiting            // the SDK waits before its retry
		clk.Advance(timeout) // the call times out
		if err := clk.WaitForWaiters(ctx, 1); err != nil {
			t.Fatal(err)
		}
		clk.Advance(5 * time.Second) // the longest wait before the sink's retry
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(apply(nil, b.Records()...), scan(t, setup, table)); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
	text := logs.String()
	if !strings.Contains(text, "level=WARN") || strings.Contains(text, "does not answer") || !strings.Contains(text, "capacity") {
		t.Errorf("want a WARN naming the table's capacity, not a DynamoDB that does not answer:\n%s", text)
	}
}

// TestThrottledWritesWarnedOncePerStep checks, against dynalite behind a
// fault-injecting HTTP client, that writes in flight together whose calls
// keep failing (throttled) log one WARN per step of the outage for the
// whole Sink (5, 10, 20... failed attempts in all, each naming the cause
// and the fix) and one line when writes get through again, not one line
// per write in flight at each step: with the default Concurrency an outage
// logged 16 lines at every step. The call timeout is off and the waits
// before retries run on a manual clock, advanced once every write waits,
// so that each round of calls fails together.
func TestThrottledWritesWarnedOncePerStep(t *testing.T) {
	t.Parallel()
	const writes, rounds = 8, 5 // each write fails 5 times: 40 failed attempts
	env := servers.Env(t)
	setup := env.DynamoDB()
	table := createTable(t, setup)
	tr, err := faults.New(faults.Config{Rules: []faults.Rule{{Operation: "UpdateItem", Kind: faults.Throughput, Times: writes * rounds}}})
	if err != nil {
		t.Fatal(err)
	}
	c := env.DynamoDB(func(o *ddb.Options) { o.HTTPClient, o.Retryer = tr, aws.NopRetryer{} })
	ctx := t.Context()
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	var logs safeBuffer
	s := newSink(t, ctx, dynamodb.Config{Client: c, Table: table, Concurrency: writes, Clock: clk, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	dynamodb.SetCallTimeout(s, 0) // the waits before retries are the only timers
	b := batch.New(1_700_000_000_000, nil, events(writes, writes, false))
	done := make(chan error, 1)
	go func() { done <- s.Write(ctx, b) }()
	for range rounds {
		if err := clk.WaitForWaiters(ctx, writes); err != nil { // every write failed and waits
			t.Fatal(err)
		}
		clk.Advance(5 * time.Second) // the longest wait before a retry
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(apply(nil, b.Records()...), scan(t, setup, table)); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
	text := logs.String()
	var warned []string
	for line := range strings.Lines(text) {
		if strings.Contains(line, "keeps failing") {
			if !strings.Contains(line, "cause=throttled") || !strings.Contains(line, "capacity") {
				t.Errorf("a warning without its cause or fix: %s", line)
			}
			_, n, _ := strings.Cut(line, " attempts=")
			n, _, _ = strings.Cut(n, " ")
			warned = append(warned, n)
		}
	}
	if diff := cmp.Diff([]string{"5", "10", "20", "40"}, warned); diff != "" {
		t.Errorf("attempts of the warnings (-want +got):\n%s\n%s", diff, text)
	}
	if n := strings.Count(text, "succeeded again"); n != 1 {
		t.Errorf("%d lines of writes getting through again, want 1:\n%s", n, text)
	}
}
