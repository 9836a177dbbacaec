package prometheus_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/metrics"
	weirprom "github.com/weirstream/weir/metrics/prometheus"
	"github.com/weirstream/weir/stream"
)

type receiver struct{}

func (receiver) Name() string { return "orders" }

func (receiver) Stats() metrics.ReceiverStats {
	return metrics.ReceiverStats{
		WorkerID: "w1", RecordsRead: 10, RangesRecomputed: 2,
		Retries: map[string]int64{"throttled": 3, "transport": 1, "timeout": 0},
		Held:    []string{"shard-0"},
		Shards: map[string]metrics.ShardStats{"shard-0": {
			Reading: true, RecordsRead: 10, BytesRead: 1234, Behind: 1500 * time.Millisecond,
			ReadLatency: metrics.Histogram{
				Bounds: []time.Duration{10 * time.Millisecond, 100 * time.Millisecond},
				Counts: []int64{1, 3, 0}, Sum: 200 * time.Millisecond,
			},
			Retries:         map[string]int64{"throttled": 3},
			LatestCompleted: "5", Checkpointed: true, Checkpoint: "5", CheckpointCommits: 2,
		}},
	}
}

// TestScrape checks that a scrape shows every metric the package doc lists,
// with the values of a known snapshot.
func TestScrape(t *testing.T) {
	c, err := metrics.New(metrics.Config{BatchInterval: time.Second, Receivers: []metrics.Receiver{receiver{}}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	info := stream.BatchInfo{Time: 1000, Records: 7, Blocks: 1, Ranges: []batch.SeqRange{{Shard: "shard-0", First: "1", Last: "2", Count: 7}}}
	c.BatchScheduled(info)
	info.SchedulingDelay = 250 * time.Millisecond
	c.BatchStarted(info)
	info.ProcessingTime = 500 * time.Millisecond
	info.Outputs = []stream.OutputInfo{{Output: "ForEach of Map (stream 1)", Retries: 3, Quarantined: 1}}
	c.BatchCompleted(info)
	c.Sample(t.Context())

	reg, text := scrape(t, c)

	for _, line := range []string{
		`weir_batches_completed_total 1`,
		`weir_batch_input_records_total 7`,
		`weir_batch_scheduling_delay_seconds_sum 0.25`,
		`weir_batch_scheduling_delay_seconds_bucket{le="0.25"} 1`,
		`weir_batch_scheduling_delay_seconds_bucket{le="0.1"} 0`,
		`weir_batch_total_delay_seconds_sum 0.75`,
		`weir_batch_total_delay_seconds_count 1`,
		`weir_batch_total_delay_seconds_bucket{le="1"} 1`,
		`weir_batch_total_delay_seconds_bucket{le="+Inf"} 1`,
		`weir_unbatched_records 3`,
		`weir_kinesis_read_bytes_total{shard="shard-0",stream="orders"} 1234`,
		`weir_kinesis_behind_latest_seconds{shard="shard-0",stream="orders"} 1.5`,
		`weir_kinesis_get_records_duration_seconds_sum{shard="shard-0",stream="orders"} 0.2`,
		`weir_kinesis_get_records_duration_seconds_bucket{shard="shard-0",stream="orders",le="0.01"} 1`,
		`weir_kinesis_get_records_duration_seconds_bucket{shard="shard-0",stream="orders",le="0.1"} 4`,
		`weir_kinesis_get_records_duration_seconds_count{shard="shard-0",stream="orders"} 4`,
		`weir_kinesis_retries_total{cause="throttled",stream="orders"} 3`,
		`weir_kinesis_retries_total{cause="transport",stream="orders"} 1`,
		`weir_kinesis_retries_total{cause="timeout",stream="orders"} 0`,
		`weir_checkpoint_commits_total{shard="shard-0",stream="orders"} 2`,
		`weir_checkpoint_lag_seconds{shard="shard-0",stream="orders"} 0`,
		`weir_leases_held{stream="orders"} 1`,
		`weir_recovery_ranges_replayed_total{stream="orders"} 2`,
		`weir_output_retries_total{output="ForEach of Map (stream 1)"} 3`,
		`weir_output_quarantined_records_total{output="ForEach of Map (stream 1)"} 1`,
	} {
		if !strings.Contains(text, "\n"+line+"\n") {
			t.Errorf("scrape lacks %q", line)
		}
	}

	// Every metric the doc lists is described and, but for the lease
	// table's (no table configured), sent.
	doc, err := readDoc()
	if err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range families {
		got = append(got, f.GetName())
	}
	want := slices.DeleteFunc(doc, func(n string) bool { return strings.HasPrefix(n, "weir_lease_table_") })
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("metrics scraped vs listed in the package doc (-doc +scraped):\n%s", diff)
	}
}

// TestScrapeFollowsConventions lints a real scrape against Prometheus's
// naming and typing conventions: promlint's checks, and three it lacks.
// The unit is the last word of a name, before _total only (not
// weir_kinesis_bytes_read_total); a latency is a histogram, not a summary
// without quantiles, from which no p99 can be computed.
func TestScrapeFollowsConventions(t *testing.T) {
	c, err := metrics.New(metrics.Config{BatchInterval: time.Second, Receivers: []metrics.Receiver{receiver{}},
		Leases: badUTF8{}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	info := stream.BatchInfo{Time: 1000, Records: 7, Blocks: 1}
	c.BatchScheduled(info)
	c.BatchStarted(info)
	c.BatchCompleted(info)
	c.Sample(t.Context())
	_, body := scrape(t, c)

	l := promlint.New(strings.NewReader(body))
	l.AddCustomValidations(unitLast, noBareSummary, latencyHistogram)
	problems, err := l.Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}

// TestCountersFromFirstScrape scrapes before any sample or batch: the
// receiver's counters are there at 0 (retries by cause included), so that
// rate() and increase() see the first retry.
func TestCountersFromFirstScrape(t *testing.T) {
	c, err := metrics.New(metrics.Config{BatchInterval: time.Second, Receivers: []metrics.Receiver{receiver{}}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	_, body := scrape(t, c)
	for _, line := range []string{
		`weir_kinesis_retries_total{cause="timeout",stream="orders"} 0`,
		`weir_lease_acquisitions_total{how="stolen",stream="orders"} 0`,
		`weir_batches_failed_total 0`,
	} {
		if !strings.Contains(body, "\n"+line+"\n") {
			t.Errorf("first scrape lacks %q", line)
		}
	}
}

// units are the base units a metric name may hold.
var units = []string{"seconds", "bytes", "ratio"}

// unitLast reports a unit that is not the last word of the name, or the
// last but _total.
func unitLast(mf *dto.MetricFamily) []error {
	words := strings.Split(strings.TrimSuffix(mf.GetName(), "_total"), "_")
	for i, w := range words {
		if slices.Contains(units, w) && i != len(words)-1 {
			return []error{fmt.Errorf("unit %q must end the name (before _total for a counter)", w)}
		}
	}
	return nil
}

// noBareSummary reports a summary without quantiles: only a sum and a
// count, from which no percentile can be computed.
func noBareSummary(mf *dto.MetricFamily) []error {
	if mf.GetType() != dto.MetricType_SUMMARY {
		return nil
	}
	for _, m := range mf.GetMetric() {
		if len(m.GetSummary().GetQuantile()) == 0 {
			return []error{errors.New("summary without quantiles: make it a histogram")}
		}
	}
	return nil
}

// latencyHistogram reports a duration or delay that is not a histogram:
// a name in _duration_seconds, _time_seconds or _delay_seconds but for the
// gauges of the latest batch.
func latencyHistogram(mf *dto.MetricFamily) []error {
	n := mf.GetName()
	latency := strings.HasSuffix(n, "_duration_seconds") || strings.HasSuffix(n, "_time_seconds") || strings.HasSuffix(n, "_delay_seconds")
	if !latency || strings.Contains(n, "_last_") || mf.GetType() == dto.MetricType_HISTOGRAM {
		return nil
	}
	return []error{fmt.Errorf("a latency must be a histogram, not a %s", mf.GetType())}
}

// scrape registers c's exporter in a pedantic registry, scrapes it over
// HTTP and returns the registry and the scraped text; a failed scrape
// fails t.
func scrape(t *testing.T, c *metrics.Collector) (*prometheus.Registry, string) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(weirprom.New(c)); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("scrape: %s\n%s", resp.Status, body)
	}
	return reg, string(body)
}

// readDoc returns the metric names doc.go lists, sorted.
func readDoc() ([]string, error) {
	b, err := os.ReadFile("doc.go")
	if err != nil {
		return nil, err
	}
	names := regexp.MustCompile(`(?m)^//\s+(weir_[a-z_]+)`).FindAllStringSubmatch(string(b), -1)
	var out []string
	for _, m := range names {
		out = append(out, m[1])
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// badUTF8 is a receiver, and a lease table, whose shard ID and lease owner
// are not valid UTF-8: anyone who can write the lease table can make them so.
type badUTF8 struct{ receiver }

func (badUTF8) Stats() metrics.ReceiverStats {
	return metrics.ReceiverStats{Shards: map[string]metrics.ShardStats{"shard-\xff": {Reading: true, RecordsRead: 1}}}
}

func (badUTF8) List(context.Context) ([]metrics.Lease, error) {
	return []metrics.Lease{{Shard: "shard-\xff", Owner: "w\xff"}}, nil // Worker "": labelled by Owner
}

// TestScrapeInvalidUTF8 scrapes label values that are not valid UTF-8: the
// scrape must succeed with the bad bytes replaced, not panic.
func TestScrapeInvalidUTF8(t *testing.T) {
	c, err := metrics.New(metrics.Config{BatchInterval: time.Second, Receivers: []metrics.Receiver{badUTF8{}},
		Leases: badUTF8{}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	c.Sample(t.Context())
	_, body := scrape(t, c)
	for _, line := range []string{
		`weir_kinesis_records_read_total{shard="shard-` + "\uFFFD" + `",stream="orders"} 1`,
		`weir_lease_table_leases{worker="w` + "\uFFFD" + `"} 1`,
	} {
		if !strings.Contains(body, "\n"+line+"\n") {
			t.Errorf("scrape lacks %q", line)
		}
	}
}

// movedAway is a receiver whose lease of shard-0 moved to another worker:
// its reader stopped, after a last read 90s behind the tip.
type movedAway struct{ receiver }

func (movedAway) Stats() metrics.ReceiverStats {
	return metrics.ReceiverStats{WorkerID: "w1", Shards: map[string]metrics.ShardStats{
		"shard-0": {Reading: false, RecordsRead: 10, Behind: 90 * time.Second},
	}}
}

// TestScrapeNoLagOfShardNotRead scrapes a shard whose reader stopped (its
// lease moved to another worker): its lag, frozen at its last read, is not
// sent, or a max over the workers would show the old owner's lag for ever
// and an alert on it would never end; its counters and reading=0 are.
func TestScrapeNoLagOfShardNotRead(t *testing.T) {
	c, err := metrics.New(metrics.Config{BatchInterval: time.Second, Receivers: []metrics.Receiver{movedAway{}}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	c.Sample(t.Context())
	_, body := scrape(t, c)
	if strings.Contains(body, "\nweir_kinesis_behind_latest_seconds{") {
		t.Errorf("scrape sends the lag of a shard no longer read:\n%s", body)
	}
	for _, line := range []string{
		`weir_kinesis_records_read_total{shard="shard-0",stream="orders"} 10`,
		`weir_kinesis_shard_reading{shard="shard-0",stream="orders"} 0`,
	} {
		if !strings.Contains(body, "\n"+line+"\n") {
			t.Errorf("scrape lacks %q", line)
		}
	}
}

// twoBadOwners is a lease table whose two owners differ only in bytes
// that are not valid UTF-8.
type twoBadOwners struct{}

func (twoBadOwners) List(context.Context) ([]metrics.Lease, error) {
	return []metrics.Lease{{Shard: "shard-0", Owner: "w\xff"}, {Shard: "shard-1", Owner: "w\xfe"}}, nil
}

// TestScrapeOwnersAliasedByUTF8Repair scrapes a lease table whose two
// owners become the same label value once their bad bytes are replaced:
// their leases are counted under that value, once, rather than sent twice
// with the same labels, which fails the whole scrape.
func TestScrapeOwnersAliasedByUTF8Repair(t *testing.T) {
	c, err := metrics.New(metrics.Config{BatchInterval: time.Second, Leases: twoBadOwners{}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	c.Sample(t.Context())
	_, body := scrape(t, c)
	if line := `weir_lease_table_leases{worker="w` + "\uFFFD" + `"} 2`; !strings.Contains(body, "\n"+line+"\n") {
		t.Errorf("scrape lacks %q", line)
	}
}
