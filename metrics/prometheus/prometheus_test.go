package prometheus_test

import (
	"context"
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

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/checkpoint"
	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/metrics"
	weirprom "github.com/weirstream/weir/metrics/prometheus"
	"github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/stream"
)

type receiver struct{}

func (receiver) Stats() kinesis.Stats {
	return kinesis.Stats{
		RecordsRead: 10, RangesRecomputed: 2,
		Retries: map[kinesis.RetryCause]int64{kinesis.CauseThrottled: 3, kinesis.CauseTransport: 1},
		Shards: map[string]kinesis.ShardStats{"shard-0": {
			Reading: true, RecordsRead: 10, BytesRead: 1234, MillisBehindLatest: 1500,
			GetRecordsCalls: 4, GetRecordsTime: 200 * time.Millisecond,
			Retries: map[kinesis.RetryCause]int64{kinesis.CauseThrottled: 3},
		}},
	}
}

func (receiver) CheckpointStats() checkpoint.Stats {
	return checkpoint.Stats{Commits: 2, Shards: map[string]checkpoint.ShardStats{"shard-0": {Registered: true, Commits: 2}}}
}

func (receiver) HeldLeases() []leasetable.Lease {
	return []leasetable.Lease{{Shard: "shard-0", Owner: "w1"}}
}
func (receiver) WorkerID() string { return "w1" }

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
	c.BatchCompleted(info)
	c.Sample(t.Context())

	reg, text := scrape(t, c)

	for _, line := range []string{
		`weir_batches_completed_total 1`,
		`weir_batch_input_records_total 7`,
		`weir_batch_scheduling_delay_seconds_sum 0.25`,
		`weir_batch_total_delay_seconds_sum 0.75`,
		`weir_batch_total_delay_seconds_count 1`,
		`weir_unbatched_records 3`,
		`weir_kinesis_bytes_read_total{shard="shard-0",source="0"} 1234`,
		`weir_kinesis_behind_latest_seconds{shard="shard-0",source="0"} 1.5`,
		`weir_kinesis_get_records_seconds_sum{shard="shard-0",source="0"} 0.2`,
		`weir_kinesis_retries_total{cause="throttled",shard="shard-0",source="0"} 3`,
		`weir_kinesis_retries_total{cause="transport",shard="",source="0"} 1`,
		`weir_checkpoint_commits_total{shard="shard-0",source="0"} 2`,
		`weir_leases_held{source="0"} 1`,
		`weir_recovery_ranges_replayed_total{source="0"} 2`,
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

func (badUTF8) Stats() kinesis.Stats {
	return kinesis.Stats{Shards: map[string]kinesis.ShardStats{"shard-\xff": {Reading: true, RecordsRead: 1}}}
}

func (badUTF8) List(context.Context) ([]leasetable.Lease, error) {
	return []leasetable.Lease{{Shard: "shard-\xff", Owner: "w\xff"}}, nil
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
		`weir_kinesis_records_read_total{shard="shard-` + "\uFFFD" + `",source="0"} 1`,
		`weir_lease_table_leases{owner="w` + "\uFFFD" + `"} 1`,
	} {
		if !strings.Contains(body, "\n"+line+"\n") {
			t.Errorf("scrape lacks %q", line)
		}
	}
}
