package statusbrowser

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/internal/localaws"
	"github.com/weirstream/weir/metrics"
	"github.com/weirstream/weir/metrics/kinesismetrics"
	"github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/status"
	"github.com/weirstream/weir/stream"
)

// browser returns the path of a Chromium or Chrome binary. Without one it
// fails the test under CI (.ci/run installs Chromium) and skips it
// otherwise, saying how to install one.
func browser(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("WEIR_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no chromium, chromium-browser or google-chrome in PATH (nor WEIR_CHROMIUM): install one, e.g. apt-get install -y chromium"
	if os.Getenv("CI") != "" {
		t.Fatal(msg + "; .ci/run installs it")
	}
	t.Skip("browser test skipped: " + msg)
	return ""
}

// batchesDone is a stream.Listener that signals when the completed
// batches reach a number.
type batchesDone struct {
	stream.NopListener
	mu      sync.Mutex
	n       int
	waiters map[int]chan struct{}
}

func (b *batchesDone) BatchCompleted(stream.BatchInfo) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.n++
	for n, ch := range b.waiters {
		if b.n >= n {
			close(ch)
			delete(b.waiters, n)
		}
	}
}

// reached returns a channel closed once n batches completed.
func (b *batchesDone) reached(n int) <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	ch := make(chan struct{})
	if b.n >= n {
		close(ch)
		return ch
	}
	if b.waiters == nil {
		b.waiters = map[int]chan struct{}{}
	}
	b.waiters[n] = ch
	return ch
}

func wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(time.Minute):
		t.Fatalf("timed out after a minute waiting for %s", what)
	}
}

// TestStatusPageInBrowser runs a pipeline on a local 2-shard Kinesis stream
// with leases in a local DynamoDB, serves its status page, and loads it in
// headless Chromium twice: the page has no console error, its four charts
// have a point per completed batch and more the second time, and the shard
// and lease tables show the stream's shards held by this worker.
func TestStatusPageInBrowser(t *testing.T) {
	chrome := browser(t)
	env := localaws.ForTest(t, localaws.Options{Kinesis: true, DynamoDB: true})
	ctx := t.Context()
	name := localaws.UniqueName(t)
	if err := env.CreateStream(ctx, name, 2); err != nil {
		t.Fatal(err)
	}
	put := func(n int) {
		t.Helper()
		lines := make([][]byte, n)
		for i := range lines {
			lines[i] = []byte(fmt.Sprintf("the quick brown fox %d", i))
		}
		if err := env.PutRecords(ctx, name, lines, nil); err != nil {
			t.Fatal(err)
		}
	}
	put(300)

	awsCfg := env.AWSConfig()
	src, err := kinesis.New(kinesis.Config{
		Stream: name, App: name, InitialPosition: kinesis.TrimHorizon,
		AWS: &awsCfg, Endpoint: env.KinesisEndpoint, PollInterval: 50 * time.Millisecond,
		RecordsPerRead: 40,
		Leases:         &leasetable.Config{Endpoint: env.DynamoDBEndpoint},
	})
	if err != nil {
		t.Fatal(err)
	}
	leases, err := kinesismetrics.Leases(t.Context(), leasetable.Config{TableName: name, DynamoDB: env.DynamoDB()})
	if err != nil {
		t.Fatal(err)
	}
	const batchInterval = 200 * time.Millisecond
	collector, err := metrics.New(metrics.Config{
		BatchInterval: batchInterval, Receivers: []metrics.Receiver{kinesismetrics.Receiver(src)}, Leases: leases,
		SampleInterval: batchInterval, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	done := &batchesDone{}
	sc, err := stream.NewPipeline(stream.Config{BatchInterval: batchInterval, Listeners: []stream.Listener{collector, done}})
	if err != nil {
		t.Fatal(err)
	}
	var records atomic.Int64
	allRead := make(chan struct{})
	var closeOnce sync.Once
	stream.ForEachBatch(stream.From(sc, src), func(_ context.Context, b *batch.Batch[kinesis.Record]) error {
		if records.Add(int64(b.Len())) >= 300 {
			closeOnce.Do(func() { close(allRead) })
		}
		return nil
	})
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := collector.Run(runCtx); err != nil {
			t.Errorf("collector: %v", err)
		}
	})
	wg.Go(func() {
		if err := sc.Run(runCtx); err != nil && runCtx.Err() == nil {
			t.Errorf("pipeline: %v", err)
		}
	})
	defer wg.Wait()
	defer stop()

	h, err := status.New(status.Config{Collector: collector, Title: "browser test", Refresh: -1})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome), chromedp.NoSandbox, chromedp.WindowSize(1360, 900))...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()
	var mu sync.Mutex
	var problems []string
	err = chromedp.Listen(bctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			problems = append(problems, fmt.Sprintf("exception: %s", ev.ExceptionDetails.Text))
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeWarning {
				problems = append(problems, fmt.Sprintf("console.%s: %v", ev.Type, ev.Args))
			}
		case *cdplog.EventEntryAdded:
			if ev.Entry.Level == cdplog.EntryLevelError || ev.Entry.Level == cdplog.EntryLevelWarning {
				problems = append(problems, fmt.Sprintf("log %s (%s): %s %s", ev.Entry.Level, ev.Entry.Source, ev.Entry.Text, ev.Entry.URL))
			}
		}
	})
	if err != nil {
		t.Fatalf("starting %s: %v", chrome, err)
	}

	// load opens the page and returns the data points of each chart and
	// the rows of the shard and lease-owner tables.
	load := func() (points []int, shards, owners string) {
		t.Helper()
		collector.Sample(ctx) // the page shows the receiver as of now
		if _, err := chromedp.Call(bctx, cdplog.Enable, cdp.Empty{}); err != nil {
			t.Fatalf("enabling the browser log: %v", err)
		}
		if err := chromedp.Do(bctx, chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#batches"))); err != nil {
			t.Fatalf("loading the page in %s: %v", chrome, err)
		}
		pts, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("svg.chart")).map(s => s.dataset.points)`))
		if err != nil {
			t.Fatalf("reading the charts: %v", err)
		}
		if shards, err = chromedp.Run(bctx, chromedp.Text(chromedp.CSS("#shards"))); err != nil {
			t.Fatalf("reading the shard table: %v", err)
		}
		if owners, err = chromedp.Run(bctx, chromedp.Text(chromedp.CSS("#owners"))); err != nil {
			t.Fatalf("reading the lease owners table: %v", err)
		}
		for _, p := range pts {
			n, err := strconv.Atoi(p)
			if err != nil {
				t.Fatalf("chart data-points %q: %v", p, err)
			}
			points = append(points, n)
		}
		return points, shards, owners
	}

	wait(t, allRead, "the pipeline to read the 300 records")
	wait(t, done.reached(5), "5 completed batches")
	first, shards, owners := load()
	if len(first) != 4 {
		t.Fatalf("%d charts on the page, want 4", len(first))
	}
	for i, n := range first {
		if n < 5 {
			t.Errorf("chart %d has %d points after 5 batches or more", i, n)
		}
	}
	for _, want := range []string{"shardId-000000000000", "shardId-000000000001", "reading"} {
		if !strings.Contains(shards, want) {
			t.Errorf("shard table lacks %q:\n%s", want, shards)
		}
	}
	if !strings.Contains(owners, src.WorkerID()) || !strings.Contains(owners, "this worker") {
		t.Errorf("lease owners table lacks this worker %s:\n%s", src.WorkerID(), owners)
	}

	// The charts move: more batches, more points.
	put(200)
	wait(t, done.reached(first[0]+5), "5 more batches")
	second, _, _ := load()
	for i := range second {
		if second[i] <= first[i] {
			t.Errorf("chart %d: %d points, then %d: it did not move", i, first[i], second[i])
		}
	}

	png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	dir := os.Getenv("WEIR_SCREENSHOT_DIR")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "status-page.png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of the status page: %s (%d bytes); charts had %v points, then %v", path, len(png), first, second)

	mu.Lock()
	defer mu.Unlock()
	for _, p := range problems {
		t.Errorf("browser reported %s", p)
	}
}
