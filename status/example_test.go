package status_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/metrics"
	"github.com/weirstream/weir/status"
	"github.com/weirstream/weir/stream"
)

// The page is served from a metrics.Collector that listens to the pipeline
// (stream.Config.Listeners); here the collector is fed one batch by hand and
// the handler is called directly instead of through a server.
func Example() {
	c, err := metrics.New(metrics.Config{BatchInterval: time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println(err)
		return
	}
	// p, err := stream.NewPipeline(stream.Config{Listeners: []stream.Listener{c}, ...})
	b := stream.BatchInfo{Time: batch.Time(1000), Records: 42}
	c.BatchScheduled(b)
	c.BatchStarted(b)
	c.BatchCompleted(b)

	page, err := status.New(status.Config{Collector: c, Title: "wordcount"})
	if err != nil {
		fmt.Println(err)
		return
	}
	mux := http.NewServeMux()
	mux.Handle("/status/", page)
	// go http.ListenAndServe("127.0.0.1:8080", mux) // loopback: the page has no authentication

	get := func(url string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, url, nil))
		return rec
	}
	rec := get("http://127.0.0.1:8080/status/")
	fmt.Println("page:", rec.Code, rec.Header().Get("Content-Type"))

	rec = get("http://localhost:8080/status/snapshot.json")
	var snap struct { // snapshot.json: the parts shown here
		Batches struct{ Completed, Records int64 }
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &snap); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("snapshot:", rec.Code, snap.Batches.Completed, "batch,", snap.Batches.Records, "records")

	// A Host header naming another site (DNS rebinding) is refused.
	fmt.Println("other host:", get("http://attacker.example/status/").Code)
	// Output:
	// page: 200 text/html; charset=utf-8
	// snapshot: 200 1 batch, 42 records
	// other host: 421
}
