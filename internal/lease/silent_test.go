package lease

import (
	"context"
	"encoding/json"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/localaws/faults"
)

// jsonRecords decodes the JSON lines of a slog.JSONHandler written to out.
func jsonRecords(t *testing.T, out *syncBuf) []map[string]any {
	t.Helper()
	var recs []map[string]any
	for line := range strings.Lines(out.tail(math.MaxInt)) {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		recs = append(recs, m)
	}
	return recs
}

// TestEnsureWarnsAndGivesUpOnASilentDynamoDB checks, on a manual clock,
// that a Coordinator whose DynamoDB endpoint accepts connections and never
// answers warns at the first unanswered call, naming the endpoint, the
// table and the fix, warns again as the streak goes on, and then fails
// Run instead of retrying silently forever.
func TestEnsureWarnsAndGivesUpOnASilentDynamoDB(t *testing.T) {
	endpoint := faults.Silent(t)
	db := dynamodb.New(dynamodb.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(endpoint),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
		Retryer:     aws.NopRetryer{}, // one attempt a call: weir's loop alone is tested
	})
	clk := clock.NewManual(time.Unix(0, 0))
	var out syncBuf
	coord, err := NewCoordinator(CoordinatorConfig{
		Config: leasetable.Config{TableName: "leases", DynamoDB: db},
		Clock:  clk, Logger: slog.New(slog.NewJSONHandler(&out, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	runErr := make(chan error, 1)
	runCtx, cancelRun := context.WithCancel(t.Context())
	defer cancelRun()
	ctx, stopAdvancing := context.WithCancel(t.Context())
	defer stopAdvancing()
	go func() {
		err := coord.Run(runCtx)
		stopAdvancing()
		runErr <- err
	}()
	start := clk.Now()
	// Each wait is an attempt's timeout or Ensure's pause between calls.
	for waits := 0; clk.WaitForWaiters(ctx, 1) == nil; waits++ {
		if waits == 1000 {
			cancelRun()
			t.Errorf("Run still waiting for the table after %v of virtual time", clk.Now().Sub(start))
			break
		}
		clk.Advance(DefaultLeaseDuration / 5)
	}
	err = <-runErr
	if err == nil || !strings.Contains(err.Error(), endpoint) || !strings.Contains(err.Error(), "answered none of 10") {
		t.Fatalf("Run = %v; want an error saying DynamoDB at %s answered none of 10 calls", err, endpoint)
	}
	t.Logf("Run failed after %v of virtual time: %v", clk.Now().Sub(start), err)
	var attempts []float64
	for _, r := range jsonRecords(t, &out) {
		if r["level"] != "WARN" {
			continue
		}
		attempts = append(attempts, r["attempts"].(float64))
		if r["endpoint"] != endpoint || r["table"] != "leases" || r["cause"] != "timeout" || !strings.Contains(r["fix"].(string), endpoint) {
			t.Errorf("warning %v: want the endpoint %s, the table, cause timeout and a fix naming the endpoint", r, endpoint)
		}
	}
	if len(attempts) != 2 || attempts[0] != 1 || attempts[1] != 5 {
		t.Errorf("warnings at attempts %v, want [1 5]: at once, then when the streak reaches 5", attempts)
	}
}
