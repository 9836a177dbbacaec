package dynamolog_test

import (
	"bytes"
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/localaws"
	"github.com/weirstream/weir/internal/localaws/faults"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/recovery/dynamolog"
	"github.com/weirstream/weir/source/memory"
	"github.com/weirstream/weir/stream"
)

// waitLimit bounds every wait of the outage test, so a bug fails it instead
// of hanging it; nothing is asserted about time.
const waitLimit = 2 * time.Minute

// skipClock is a clock whose timers fire at once, each moving its virtual
// time on by the timer's duration: the log's back-off waits take no real
// time, and the test knows how long they would have taken. Now is the real
// time plus the virtual time waited. onWait, if set, sees the virtual time
// waited so far after each wait.
type skipClock struct {
	mu     sync.Mutex
	waited time.Duration
	onWait func(waited time.Duration)
}

func (c *skipClock) Now() time.Time { return time.Now().Add(c.Waited()) }

func (c *skipClock) Waited() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.waited
}

func (c *skipClock) NewTimer(d time.Duration) clock.Timer {
	c.mu.Lock()
	c.waited += max(d, 0)
	waited, onWait := c.waited, c.onWait
	c.mu.Unlock()
	if onWait != nil {
		onWait(waited)
	}
	return clock.NewManual(time.Time{}).NewTimer(0)
}

func (c *skipClock) NewTicker(d time.Duration) clock.Ticker { return clock.Real{}.NewTicker(d) }

// faultyLog starts dynalite and returns it, a fault transport, and the
// configuration of a new log whose client goes through the transport
// without the SDK's retries (the log's own loop sees every failure), on a
// skipClock, without attempt timeouts.
func faultyLog(t *testing.T) (*localaws.Env, *faults.Transport, dynamolog.Config) {
	t.Helper()
	env := localaws.ForTest(t, localaws.Options{DynamoDB: true})
	tr, err := faults.New(faults.Config{})
	if err != nil {
		t.Fatal(err)
	}
	client := env.DynamoDB(func(o *dynamodb.Options) { o.HTTPClient = tr; o.Retryer = aws.NopRetryer{} })
	return env, tr, dynamolog.Config{Client: client, Table: table, Name: localaws.UniqueName(t),
		Clock: &skipClock{}, AttemptTimeout: -1}
}

// TestDynamoOutageDuringRun runs a pipeline whose DynamoDB recovery log
// loses DynamoDB for 20 s of (virtual) back-off time, starting with a put
// that reached the table but whose answer was lost, and checks the log
// rides it out: Run goes on, every record reaches the output exactly once,
// the outage is logged as a warning naming the table, and the log, read
// again, holds a consistent state.
func TestDynamoOutageDuringRun(t *testing.T) {
	env, tr, cfg := faultyLog(t)
	const outage = 20 * time.Second
	var (
		mu        sync.Mutex
		down      bool
		downSince time.Duration
	)
	clk := &skipClock{}
	clk.onWait = func(waited time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		if down && waited-downSince >= outage {
			down = false
			if err := tr.SetRules(); err != nil {
				t.Error(err)
			}
		}
	}
	var logs bytes.Buffer
	var logsMu sync.Mutex
	logger := slog.New(slog.NewTextHandler(lockedWriter{&logsMu, &logs}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg.Clock, cfg.Logger = clk, logger

	p, err := stream.NewPipeline(stream.Config{BatchInterval: 20 * time.Millisecond, BlockInterval: 10 * time.Millisecond,
		Recovery: cfg, CompactEvery: 5})
	if err != nil {
		t.Fatal(err)
	}
	src, err := memory.New[string](memory.Config{Shards: 2})
	if err != nil {
		t.Fatal(err)
	}
	var (
		outMu sync.Mutex
		seen  = map[string]int{}
		total int
	)
	progress := make(chan struct{}, 1)
	stream.ForEachBatch(stream.From(p, src), func(_ context.Context, b *batch.Batch[string]) error {
		outMu.Lock()
		for _, r := range b.Records() {
			seen[r]++
			total++
		}
		outMu.Unlock()
		select {
		case progress <- struct{}{}:
		default:
		}
		return nil
	})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- p.Run(ctx) }()

	deadline := time.After(waitLimit)
	produced := 0
	push := func(n int) {
		for range n {
			if err := src.Push("rec-" + strconv.Itoa(produced)); err != nil {
				t.Fatal(err)
			}
			produced++
		}
	}
	waitAll := func(what string) {
		for {
			outMu.Lock()
			n := total
			outMu.Unlock()
			if n >= produced {
				return
			}
			select {
			case <-progress:
			case err := <-runErr:
				t.Fatalf("%s: Run returned %v with %d of %d records output", what, err, n, produced)
			case <-deadline:
				t.Fatalf("%s: %d of %d records output after %v", what, n, produced, waitLimit)
			}
		}
	}
	push(20)
	waitAll("before the outage")

	// The outage: the next put reaches the table but its answer is lost;
	// then every request fails until the log has waited 20 s.
	mu.Lock()
	down, downSince = true, clk.Waited()
	mu.Unlock()
	if err := tr.SetRules(
		faults.Rule{Operation: "PutItem", Kind: faults.DropResponse, Times: 1},
		faults.Rule{Kind: faults.DropRequest},
	); err != nil {
		t.Fatal(err)
	}
	push(20)
	waitAll("after the outage")
	mu.Lock()
	stillDown := down
	mu.Unlock()
	if stillDown {
		t.Fatalf("the records were output while DynamoDB was still down")
	}
	if n := tr.Injected("", 0); n < 2 {
		t.Fatalf("%d faults injected, want the lost answer and the outage", n)
	}
	push(20)
	waitAll("after the recovery")
	cancel()
	if err := <-runErr; err != nil {
		t.Fatalf("Run: %v", err)
	}

	outMu.Lock()
	for i := range produced {
		if r := "rec-" + strconv.Itoa(i); seen[r] != 1 {
			t.Errorf("record %s output %d times, want once", r, seen[r])
		}
	}
	outMu.Unlock()
	logsMu.Lock()
	text := logs.String()
	logsMu.Unlock()
	for _, want := range []string{"level=WARN msg=\"dynamolog: DynamoDB did not answer", "table=" + table, "DynamoDB answers again"} {
		if !strings.Contains(text, want) {
			t.Errorf("the logs do not contain %q:\n%s", want, text)
		}
	}
	l := openDynamo(t, dynamolog.Config{Client: env.DynamoDB(), Table: table, Name: cfg.Name})
	st, err := recoverylog.Load(t.Context(), l)
	if err != nil {
		t.Fatalf("Load after the run: %v", err)
	}
	if len(st.Pending) != 0 || len(st.Unallocated) != 0 {
		t.Errorf("after a drained run the log holds %d pending batches and %d unallocated blocks, want none",
			len(st.Pending), len(st.Unallocated))
	}
	t.Logf("virtual back-off time waited: %v", clk.Waited())
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestDynamoThrottledLogsThrottling checks, on dynalite, that puts of the
// log that DynamoDB throttles (ProvisionedThroughputExceededException) are
// retried until they land, with a warning that DynamoDB throttles the
// log's table and how to fix it, not that it did not answer: it did. Puts
// that get no answer still warn so, and puts DynamoDB rejects because
// another request holds the item (TransactionConflictException) say that.
func TestDynamoThrottledLogsThrottling(t *testing.T) {
	const (
		noAnswer  = `level=WARN msg="dynamolog: DynamoDB did not answer the recovery log`
		throttled = `level=WARN msg="dynamolog: DynamoDB is throttling the recovery log's table`
		conflict  = `level=WARN msg="dynamolog: another writer holds the recovery log's item`
	)
	for _, tc := range []struct {
		name        string
		kind        faults.Kind
		want        []string
		never, over string
	}{
		{name: "throttled", kind: faults.Throughput, want: []string{throttled, "on-demand", "table=" + table},
			never: noAnswer, over: "DynamoDB no longer throttles the recovery log"},
		{name: "no answer", kind: faults.DropRequest, want: []string{noAnswer, "table=" + table},
			never: throttled, over: "DynamoDB answers again"},
		{name: "conflict", kind: faults.TransactionConflict, want: []string{conflict, "TransactWriteItems", "table=" + table},
			never: noAnswer, over: "the recovery log's item is free again"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, tr, cfg := faultyLog(t)
			var logs bytes.Buffer
			var logsMu sync.Mutex
			cfg.Logger = slog.New(slog.NewTextHandler(lockedWriter{&logsMu, &logs}, &slog.HandlerOptions{Level: slog.LevelInfo}))
			l := openDynamo(t, cfg)
			if err := tr.SetRules(faults.Rule{Operation: "PutItem", Kind: tc.kind, Times: 3}); err != nil {
				t.Fatal(err)
			}
			mustAppend(t, l, block(0, 0))
			if n := tr.Injected("PutItem", tc.kind); n != 3 {
				t.Fatalf("%d faults injected, want 3", n)
			}
			logsMu.Lock()
			text := logs.String()
			logsMu.Unlock()
			for _, want := range append(tc.want, tc.over) {
				if !strings.Contains(text, want) {
					t.Errorf("the logs do not contain %q:\n%s", want, text)
				}
			}
			if strings.Contains(text, tc.never) {
				t.Errorf("the logs contain %q:\n%s", tc.never, text)
			}
		})
	}
}

// TestOpenRidesOutFailedDescribeTable checks, against dynalite behind a
// fault transport (no SDK retries), that Open's first call, the
// DescribeTable of its table, is tried again after a failure a retry may
// heal (a server error, a cut connection, 503), with a warning naming the
// table, as the log's other calls are; and that one DynamoDB refuses for
// good (access denied) fails Open at once with an error naming the table
// and the fix.
func TestOpenRidesOutFailedDescribeTable(t *testing.T) {
	t.Run("transient", func(t *testing.T) {
		env, tr, cfg := faultyLog(t)
		cfg.Table = localaws.UniqueName(t) // created by Open
		var logs bytes.Buffer
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		if err := tr.SetRules(
			faults.Rule{Operation: "DescribeTable", Kind: faults.InternalFailure, Times: 1},
			faults.Rule{Operation: "DescribeTable", Kind: faults.DropRequest, Times: 1},
			faults.Rule{Operation: "DescribeTable", Kind: faults.ServiceUnavailable, Times: 1},
		); err != nil {
			t.Fatal(err)
		}
		l, err := cfg.Open(t.Context())
		if err != nil {
			t.Fatalf("Open after 3 failed DescribeTable calls: %v", err)
		}
		defer l.Close()
		if n := tr.Injected("DescribeTable", 0); n != 3 {
			t.Errorf("%d faults injected, want 3", n)
		}
		if text := logs.String(); !strings.Contains(text, "level=WARN") || !strings.Contains(text, "table="+cfg.Table) ||
			!strings.Contains(text, "endpoint="+env.DynamoDBEndpoint) {
			t.Errorf("no warning naming the table and the endpoint of the client given:\n%s", text)
		}
	})
	t.Run("access denied", func(t *testing.T) {
		_, tr, cfg := faultyLog(t)
		if err := tr.SetRules(faults.Rule{Operation: "DescribeTable", Kind: faults.AccessDenied}); err != nil {
			t.Fatal(err)
		}
		_, err := cfg.Open(t.Context())
		if err == nil || !strings.Contains(err.Error(), cfg.Table) || !strings.Contains(err.Error(), "fix:") ||
			!strings.Contains(err.Error(), "dynamodb:DescribeTable") {
			t.Fatalf("Open with DescribeTable denied: %v, want an error naming the table and the fix", err)
		}
		if n := tr.Requests("DescribeTable"); n != 1 {
			t.Errorf("%d DescribeTable calls, want 1", n)
		}
	})
}
