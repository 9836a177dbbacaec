package prometheus_test

import (
	"bufio"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/metrics"
	weirprom "github.com/weirstream/weir/metrics/prometheus"
	"github.com/weirstream/weir/stream"
)

// Register the adapter of a pipeline's metrics.Collector with a registry and
// serve the registry on /metrics. Here the collector is fed two batches by
// hand and the handler is scraped directly.
func Example() {
	c, err := metrics.New(metrics.Config{BatchInterval: time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println(err)
		return
	}
	// p, err := stream.NewPipeline(stream.Config{Listeners: []stream.Listener{c}, ...})
	for i, records := range []int{120, 80} {
		b := stream.BatchInfo{Time: batch.Time(1000 * (i + 1)), Records: records}
		c.BatchScheduled(b)
		c.BatchStarted(b)
		c.BatchCompleted(b)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(weirprom.New(c))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	// go http.ListenAndServe("127.0.0.1:9090", mux)

	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://127.0.0.1:9090/metrics", nil))
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "weir_batches_completed_total ") || strings.HasPrefix(line, "weir_batch_input_records_total ") {
			fmt.Println(line)
		}
	}
	// Output:
	// weir_batch_input_records_total 200
	// weir_batches_completed_total 2
}
