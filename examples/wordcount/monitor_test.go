package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
)

func TestCheckAddr(t *testing.T) {
	tests := []struct {
		addr    string
		public  bool
		wantErr string // "" for none
	}{
		{addr: "127.0.0.1:8080"},
		{addr: "[::1]:8080"},
		{addr: "localhost:8080"},
		{addr: ":8080", wantErr: "-http-public"},
		{addr: "0.0.0.0:8080", wantErr: "-http-public"},
		{addr: "0.0.0.0:8080", public: true},
		{addr: "8080", wantErr: "want host:port"},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			err := (&monitorOptions{addr: tt.addr, public: tt.public}).checkAddr()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("checkAddr: %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("checkAddr: %v, want an error mentioning %q", err, tt.wantErr)
			}
		})
	}
}

func TestHostNames(t *testing.T) {
	tests := []struct {
		addr, hosts string
		want        []string
	}{
		{"127.0.0.1:8080", "", nil},
		{"0.0.0.0:8080", "status.internal, other.internal,", []string{"status.internal", "other.internal"}},
		{"myhost:8080", "", []string{"myhost"}},
		{":8080", "a.example", []string{"a.example"}},
	}
	for _, tt := range tests {
		got := (&monitorOptions{addr: tt.addr, hosts: tt.hosts}).hostNames()
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("hostNames of -http %q -http-hosts %q (-want +got):\n%s", tt.addr, tt.hosts, diff)
		}
	}
}

// lineWriter is an io.Writer that reports the first match of a pattern.
type lineWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	re    *regexp.Regexp
	found chan []string // gets the first match's submatches
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if w.re != nil {
		if m := w.re.FindStringSubmatch(w.buf.String()); m != nil {
			w.found <- m
			w.re = nil
		}
	}
	return len(p), nil
}

// TestRunServesStatusAndMetrics runs the example on the local servers with
// -http 127.0.0.1:0 and fetches the status page and /metrics while it runs.
func TestRunServesStatusAndMetrics(t *testing.T) {
	out := &lineWriter{re: regexp.MustCompile(`status page: (http://127\.0\.0\.1:\d+/)  Prometheus metrics: (\S+)\n`), found: make(chan []string, 1)}
	o := options{source: "local", app: "wordcount-http-test", shards: 2, batch: 100 * time.Millisecond,
		rate: 100, top: 3, state: t.TempDir(), out: t.TempDir(), monitor: monitorOptions{addr: "127.0.0.1:0"}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- run(ctx, o, out) }()
	var urls []string
	select {
	case urls = <-out.found:
	case err := <-done:
		t.Fatalf("run returned before serving: %v\n%s", err, out.buf.String())
	}
	get := func(url string) string {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s, %v", url, resp.Status, err)
		}
		return string(body)
	}
	if page := get(urls[1]); !strings.Contains(page, `<svg class="chart"`) || !strings.Contains(page, "wordcount-http-test") {
		t.Errorf("status page lacks its charts or title:\n%s", page)
	}
	m := get(urls[2])
	if !strings.Contains(m, "weir_batches_completed_total") || !strings.Contains(m, "weir_batch_total_delay_seconds_bucket") ||
		!strings.Contains(m, `weir_kinesis_retries_total{cause="throttled"`) {
		t.Errorf("/metrics lacks weir's metrics (batches, delay histogram, retries from 0):\n%s", m)
	}
	// The standard collectors beside weir's.
	if !strings.Contains(m, "\ngo_goroutines ") || (runtime.GOOS == "linux" && !strings.Contains(m, "\nprocess_cpu_seconds_total ")) {
		t.Errorf("/metrics lacks the Go and process collectors (go_*, process_*):\n%s", m)
	}
	problems, err := promlint.New(strings.NewReader(m)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("/metrics: %s: %s", p.Metric, p.Text)
	}
	// A page of another site that rebinds its name to 127.0.0.1 sends its
	// own name as Host: /metrics refuses it as the page does.
	for _, url := range urls[1:] {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = "evil.example"
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMisdirectedRequest || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s with Host evil.example: %s, nosniff %q; want 421 with nosniff", url, resp.Status, resp.Header.Get("X-Content-Type-Options"))
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
}
