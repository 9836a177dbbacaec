package kinesis

import (
	"slices"
	"testing"
	"time"
)

// TestGetRecordsLatencyBuckets counts GetRecords latencies on and around
// the bucket bounds: a bound is inclusive, and a latency over every bound
// lands in the last bucket.
func TestGetRecordsLatencyBuckets(t *testing.T) {
	var s statsCollector
	for _, d := range []time.Duration{0, 5 * time.Millisecond, 5*time.Millisecond + 1, time.Second, time.Minute} {
		s.getRecords("shard-0", d, 1)
	}
	shards := map[string]ShardStats{}
	s.addShards(shards)
	bounds := GetRecordsBounds()
	want := make([]int64, len(bounds)+1)
	want[0], want[1], want[slices.Index(bounds, time.Second)], want[len(bounds)] = 2, 1, 1, 1
	if got := shards["shard-0"].GetRecordsLatency; !slices.Equal(got, want) {
		t.Errorf("GetRecordsLatency %v, want %v (bounds %v)", got, want, bounds)
	}
}
