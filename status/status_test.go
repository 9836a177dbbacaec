package status_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/metrics"
	"github.com/weirstream/weir/status"
	"github.com/weirstream/weir/stream"
)

// newCollector returns a metrics.Collector of cfg, its BatchInterval 1s
// and its Logger discarding where unset.
func newCollector(t *testing.T, cfg metrics.Config) *metrics.Collector {
	t.Helper()
	if cfg.BatchInterval == 0 {
		cfg.BatchInterval = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	c, err := metrics.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// newHandler returns the status handler of cfg.
func newHandler(t *testing.T, cfg status.Config) *status.Handler {
	t.Helper()
	h, err := status.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// collector returns a Collector that saw batches batches, of 10*i records
// each, batch 2 failed with an error holding HTML, batch i with i output
// retries and i%2 records quarantined.
func collector(t *testing.T, batches int) *metrics.Collector {
	t.Helper()
	c := newCollector(t, metrics.Config{})
	for i := range batches {
		info := stream.BatchInfo{Time: batch.Time(1_700_000_000_000 + int64(i)*1000), Records: 10 * i, Blocks: 1,
			Ranges: []batch.SeqRange{{Stream: "s", Shard: "shard-0", First: "49590338271490256608559692538361571095921575989136588802", Last: "49590338271490256608559692538361571095921575989136588899", Count: 10 * i}}}
		c.BatchScheduled(info)
		info.SchedulingDelay = time.Duration(i) * 10 * time.Millisecond
		c.BatchStarted(info)
		info.ProcessingTime = 200 * time.Millisecond
		if i == 2 {
			info.Err = errors.New("stream: batch 2: output 0: <b>boom</b>")
		}
		info.Outputs = []stream.OutputInfo{{Output: "ForEach of From(source 0) (stream 0)", Retries: i, Quarantined: i % 2}}
		c.BatchCompleted(info)
	}
	return c
}

func TestNewRefusesBadConfig(t *testing.T) {
	_, err := status.New(status.Config{Refresh: 1500 * time.Millisecond})
	if !errors.Is(err, status.ErrInvalidConfig) || !strings.Contains(err.Error(), "Collector") || !strings.Contains(err.Error(), "Refresh") {
		t.Errorf("New: %v, want ErrInvalidConfig naming Collector and Refresh", err)
	}
}

func TestPage(t *testing.T) {
	tests := []struct {
		name       string
		batches    int
		wantPoints string
	}{
		{"no batches", 0, "0"},
		{"five batches", 5, "5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHandler(t, status.Config{Collector: collector(t, tt.batches), Title: "wordcount"})
			resp, body := request(t, h, http.MethodGet, "/", "")
			if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
				t.Fatalf("GET /: %s %s", resp.Status, resp.Header.Get("Content-Type"))
			}
			if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
				t.Errorf("Content-Security-Policy %q lets the page load from elsewhere", csp)
			}
			var points []string
			for _, m := range regexp.MustCompile(`<svg class="chart" data-points="(\d+)"`).FindAllStringSubmatch(body, -1) {
				points = append(points, m[1])
			}
			want := []string{tt.wantPoints, tt.wantPoints, tt.wantPoints, tt.wantPoints}
			if diff := cmp.Diff(want, points); diff != "" {
				t.Errorf("chart points (-want +got):\n%s", diff)
			}
			if strings.Contains(body, "<b>boom</b>") {
				t.Error("an error text is not escaped")
			}
			if tt.batches > 2 && !strings.Contains(body, "&lt;b&gt;boom&lt;/b&gt;") {
				t.Error("the failed batch's error is not shown")
			}
			if tt.batches > 0 && !strings.Contains(body, "49590…588899") {
				t.Error("the batches' ranges are not shown")
			}
			// Batches 1 and 3 quarantined a record each; 0+1+2+3+4 retries.
			if tt.batches == 5 && (!strings.Contains(body, `id="quarantined">2<`) || !strings.Contains(body, "10 output retries")) {
				t.Error("the quarantined records and output retries are not shown")
			}
		})
	}
}

func TestSnapshotJSON(t *testing.T) {
	h := newHandler(t, status.Config{Collector: collector(t, 3)})
	resp, body := request(t, h, http.MethodGet, "/status/snapshot.json", "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET snapshot.json: %s", resp.Status)
	}
	var s struct {
		BatchInterval float64
		Batches       struct {
			Completed, Failed int64
			ProcessingTime    struct {
				Bounds []float64
				Sum    float64
			}
		}
		Recent []struct{ SchedulingDelay, ProcessingTime float64 }
	}
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatal(err)
	}
	if s.Batches.Completed != 3 || len(s.Recent) != 3 || s.Batches.Failed != 1 {
		t.Errorf("snapshot: %d completed, %d recent, %d failed; want 3, 3, 1", s.Batches.Completed, len(s.Recent), s.Batches.Failed)
	}
	// Durations in seconds, not nanoseconds.
	if s.BatchInterval != 1 || s.Recent[2].SchedulingDelay != 0.02 || s.Recent[2].ProcessingTime != 0.2 ||
		s.Batches.ProcessingTime.Sum != 0.6 || s.Batches.ProcessingTime.Bounds[0] != 0.01 {
		t.Errorf("durations: batch interval %v, last batch's delay %v and processing %v, processing sum %v, first bound %v; want 1, 0.02, 0.2, 0.6, 0.01 (seconds)",
			s.BatchInterval, s.Recent[2].SchedulingDelay, s.Recent[2].ProcessingTime, s.Batches.ProcessingTime.Sum, s.Batches.ProcessingTime.Bounds[0])
	}
}

func TestOnlyReads(t *testing.T) {
	h := newHandler(t, status.Config{Collector: collector(t, 0)})
	if resp, _ := request(t, h, http.MethodPost, "/", ""); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /: %s, want 405", resp.Status)
	}
}

// table is a metrics.LeaseLister of fixed leases.
type table []metrics.Lease

func (t table) List(context.Context) ([]metrics.Lease, error) { return slices.Clone(t), nil }

// receiver is a metrics.Receiver reading two shards, one of them held and
// not yet checkpointed by this worker.
type receiver struct{}

func (receiver) Name() string { return "orders" }

func (receiver) Stats() metrics.ReceiverStats {
	return metrics.ReceiverStats{WorkerID: "me", Held: []string{"shard-a"}, Shards: map[string]metrics.ShardStats{
		"shard-a": {Reading: true, RecordsRead: 42, BytesRead: 4200, Behind: 1500 * time.Millisecond, LastAdded: "123", LatestCompleted: "120",
			Checkpointed: true, Checkpoint: "TRIM_HORIZON"},
		"shard-b": {Ended: true, Drained: true, LatestCompleted: "99", Checkpointed: true, Checkpoint: "99", CheckpointCommits: 1},
	}}
}

// TestPageShowsShardsAndFleet checks the shard table and the lease owners
// across the fleet.
func TestPageShowsShardsAndFleet(t *testing.T) {
	c := newCollector(t, metrics.Config{Receivers: []metrics.Receiver{receiver{}},
		Leases: table{{Shard: "shard-a", Owner: "me", Counter: 3}, {Shard: "shard-c", Owner: "other", Counter: 9}, {Shard: "shard-d"}}})
	c.Sample(t.Context())
	text := pageText(t, newHandler(t, status.Config{Collector: c}))
	for _, want := range []string{
		"orders shard-a lease reading 42 4.2 kB 1.5s 123 120 TRIM_HORIZON –",
		"orders shard-b ended 0 0 B 0 99 99 0",
		"me this worker 1 shard-a",
		"other 1 shard-c",
		"unowned 1 shard-d",
		"2 workers hold leases",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("page lacks %q; its text:\n%s", want, text)
		}
	}
}

// request sends method path to h with the Host header host ("" keeps the
// server's address) and returns the response and its body.
func request(t *testing.T, h http.Handler, method, path, host string) (*http.Response, string) {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

// pageText returns the text of h's page, its tags and runs of white space
// each made one space.
func pageText(t *testing.T, h http.Handler) string {
	t.Helper()
	_, body := request(t, h, http.MethodGet, "/", "")
	text := regexp.MustCompile(`<[^>]+>`).ReplaceAllString(body, " ")
	return strings.Join(strings.Fields(text), " ")
}

// guardMetrics returns a handler answering "metrics" behind h's Guard.
func guardMetrics(h *status.Handler) http.Handler {
	return h.Guard(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "metrics") }))
}

// TestHostCheck sends requests naming various hosts, to the page and to a
// handler behind Guard: only localhost, IP addresses and Config.Hosts are
// answered, which defeats DNS rebinding.
func TestHostCheck(t *testing.T) {
	h := newHandler(t, status.Config{Collector: collector(t, 3), Hosts: []string{"status.internal"}})
	guarded := guardMetrics(h)
	tests := []struct {
		host string
		want int
	}{
		{"", http.StatusOK}, // the server's 127.0.0.1:port
		{"localhost:8080", http.StatusOK},
		{"LOCALHOST", http.StatusOK},
		{"[::1]:8080", http.StatusOK},
		{"10.0.0.7:8080", http.StatusOK},
		{"status.internal:8080", http.StatusOK},
		{"Status.Internal.", http.StatusOK},
		{"evil.example", http.StatusMisdirectedRequest},
		{"evil.example:8080", http.StatusMisdirectedRequest},
		{"localhost.evil.example", http.StatusMisdirectedRequest},
		{"127.0.0.1.nip.io", http.StatusMisdirectedRequest},
	}
	for _, tt := range tests {
		for _, target := range []struct {
			name, path string
			h          http.Handler
		}{{"page", "/", h}, {"snapshot", "/snapshot.json", h}, {"guarded", "/metrics", guarded}} {
			resp, body := request(t, target.h, http.MethodGet, target.path, tt.host)
			if resp.StatusCode != tt.want {
				t.Errorf("%s with Host %q: %s, want %d", target.name, tt.host, resp.Status, tt.want)
			}
			if tt.want != http.StatusOK && (strings.Contains(body, "shard-0") || strings.Contains(body, "metrics")) {
				t.Errorf("%s with Host %q: refused, yet the body shows data: %.200s", target.name, tt.host, body)
			}
		}
	}
	if _, err := status.New(status.Config{Collector: collector(t, 0), Hosts: []string{"*.example", "a:80", ""}}); !errors.Is(err, status.ErrInvalidConfig) ||
		!strings.Contains(err.Error(), "Hosts[0]") || !strings.Contains(err.Error(), "Hosts[1]") || !strings.Contains(err.Error(), "Hosts[2]") {
		t.Errorf("New with bad Hosts: %v, want ErrInvalidConfig naming Hosts[0], [1] and [2]", err)
	}
}

// TestSecurityHeaders checks that every response, refusals included,
// forbids framing and content sniffing.
func TestSecurityHeaders(t *testing.T) {
	h := newHandler(t, status.Config{Collector: collector(t, 3)})
	guarded := guardMetrics(h)
	for _, tt := range []struct {
		name, method, path, host string
		h                        http.Handler
	}{
		{"page", http.MethodGet, "/", "", h},
		{"snapshot", http.MethodGet, "/snapshot.json", "", h},
		{"POST", http.MethodPost, "/", "", h},
		{"other host", http.MethodGet, "/", "evil.example", h},
		{"guarded", http.MethodGet, "/metrics", "", guarded},
	} {
		resp, _ := request(t, tt.h, tt.method, tt.path, tt.host)
		if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s: X-Content-Type-Options %q, want nosniff", tt.name, got)
		}
		if got := resp.Header.Get("X-Frame-Options"); got != "DENY" {
			t.Errorf("%s: X-Frame-Options %q, want DENY", tt.name, got)
		}
		if got := resp.Header.Get("Content-Security-Policy"); !strings.Contains(got, "frame-ancestors 'none'") {
			t.Errorf("%s: Content-Security-Policy %q, want frame-ancestors 'none'", tt.name, got)
		}
	}
}

// TestPageBoundedByHugeErrors fails every batch of a full history with a
// 1 MiB error: the page and the snapshot stay small.
func TestPageBoundedByHugeErrors(t *testing.T) {
	c := newCollector(t, metrics.Config{})
	huge := errors.New(strings.Repeat("e", 1<<20))
	for i := range 2 * metrics.DefaultHistory {
		info := stream.BatchInfo{Time: batch.Time(1_700_000_000_000 + int64(i)*1000), Records: 1, Blocks: 1, Err: huge}
		c.BatchScheduled(info)
		c.BatchStarted(info)
		c.BatchCompleted(info)
	}
	h := newHandler(t, status.Config{Collector: c})
	for _, tt := range []struct {
		path  string
		limit int
	}{{"/", 512 << 10}, {"/snapshot.json", 4 << 20}} {
		resp, body := request(t, h, http.MethodGet, tt.path, "")
		t.Logf("%s: %d bytes", tt.path, len(body))
		if resp.StatusCode != http.StatusOK || len(body) > tt.limit {
			t.Errorf("%s: %s, %d bytes; want 200 OK and at most %d", tt.path, resp.Status, len(body), tt.limit)
		}
	}
}

// partialTable is a lease table with one item that is not a lease: its
// listing returns the other leases with an error naming the item.
type partialTable struct{ table }

func (t partialTable) List(ctx context.Context) ([]metrics.Lease, error) {
	ls, _ := t.table.List(ctx)
	return ls, errors.New(`item leaseKey="shard-x": leaseCounter not a number`)
}

// TestPageShowsUnreadableLeases lists a lease table with an item that is
// not a lease: the page shows the other leases, listed now, and names the
// item as unreadable, not the listing as failed.
func TestPageShowsUnreadableLeases(t *testing.T) {
	c := newCollector(t, metrics.Config{Leases: partialTable{table{{Shard: "shard-a", Owner: "w1", Counter: 3}}}})
	c.Sample(t.Context())
	text := pageText(t, newHandler(t, status.Config{Collector: c}))
	for _, want := range []string{
		"w1 1 shard-a",
		"1 worker holds leases. Items of the table not read as leases (their shards are not processed until fixed): item leaseKey=&#34;shard-x&#34;: leaseCounter not a number",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("page lacks %q; its text:\n%s", want, text)
		}
	}
	if strings.Contains(text, "listing failed") {
		t.Errorf("page says a listing failed; its text:\n%s", text)
	}
}

// lagging is a receiver of stream orders whose shard-0 is read further
// behind the tip at every sample.
type lagging struct{ behind *time.Duration }

func (lagging) Name() string { return "orders" }

func (r lagging) Stats() metrics.ReceiverStats {
	*r.behind += 10 * time.Second
	return metrics.ReceiverStats{Shards: map[string]metrics.ShardStats{"shard-0": {Reading: true, Behind: *r.behind}}}
}

// TestPageNamesTheStreamOfAWarning lets a shard fall behind: the page's
// warning names its stream beside the shard, as shard IDs repeat across
// streams.
func TestPageNamesTheStreamOfAWarning(t *testing.T) {
	c := newCollector(t, metrics.Config{Receivers: []metrics.Receiver{lagging{new(time.Duration)}},
		LagWarning: 30 * time.Second})
	for range 5 {
		c.Sample(t.Context())
	}
	text := pageText(t, newHandler(t, status.Config{Collector: c}))
	if want := "shard_lag orders shard-0 since"; !strings.Contains(text, want) {
		t.Errorf("page lacks %q; its text:\n%s", want, text)
	}
}
