package metrics

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestShardLagWarningOneLine checks that a shard ID holding a newline
// cannot forge a log line through the shard lag warning (issue 17, item
// 6): the ID is an attribute, which every handler quotes, never part of
// the message, which some handlers write as it is (slog's default one,
// through the log package, does).
func TestShardLagWarningOneLine(t *testing.T) {
	const id = "shard-0\ntime=2026-01-01T00:00:00Z level=ERROR msg=forged"
	var w warnings
	w.init(Config{BatchInterval: time.Second, DelayWarning: time.Minute, LagWarning: time.Second})
	var lines []logLine
	for i := range growthWindow + 1 {
		s := ReceiverSample{Stats: ReceiverStats{Shards: map[string]ShardStats{
			id: {Reading: true, Behind: time.Duration(10*(i+1)) * time.Second},
		}}}
		lines = append(lines, w.shards(time.Unix(int64(i), 0), []ReceiverSample{s})...)
	}
	if len(lines) != 1 {
		t.Fatalf("%d log lines, want 1 shard lag warning: %+v", len(lines), lines)
	}
	if strings.Contains(lines[0].msg, "shard-0") {
		t.Errorf("the message holds the shard ID: %q", lines[0].msg)
	}
	var buf bytes.Buffer
	c := &Collector{cfg: Config{Logger: slog.New(slog.NewTextHandler(&buf, nil))}}
	c.log(lines)
	out := strings.TrimSuffix(buf.String(), "\n")
	if strings.Contains(out, "\n") || !strings.Contains(out, `shard="shard-0\ntime=`) {
		t.Errorf("log output is not one line with the shard quoted:\n%s", out)
	}
}
