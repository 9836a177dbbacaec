//go:build unix

package crashtest

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/stream"
)

// TestInterruptDrainsAndHandsLeasesBack runs the README's program shape
// (signal.NotifyContext, then p.Run(ctx)) in a child process with leases,
// checkpoints in DynamoDB and a directory recovery log, and stops it with
// Ctrl-C (SIGINT): the child must exit with status 0, after outputting every
// record put exactly once, with every lease handed back (no owner) and
// checkpointed at its shard's last record, which is the last completed
// position since every record was output, and with nothing pending in its
// log. A second child then starts, and Ctrl-C drains it the same way: the
// first one's leases were free at once, not left to expire.
func TestInterruptDrainsAndHandsLeasesBack(t *testing.T) {
	h := newHarness(t, servers.Env(t), 2)
	prod := newProducer(h.env.Kinesis(), h.stream)
	c := h.start()
	h.awaitBatches(c, 1) // the child is running batches before records come
	if err := prod.putOnce(t.Context(), 200); err != nil {
		t.Fatal(err)
	}
	put, maybe, maxSeq := prod.snapshot()
	h.awaitOutput(c, put)
	c.stop(os.Interrupt)
	f := h.check(put, maybe)
	if f.Duplicates != 0 {
		t.Errorf("%v: want every record exactly once after a clean Ctrl-C", f)
	}
	h.checkLeases(maxSeq)
	h.checkLog()
	h.checkJournal()

	c = h.start()
	if err := prod.putOnce(t.Context(), 100); err != nil {
		t.Fatal(err)
	}
	put, maybe, maxSeq = prod.snapshot()
	h.awaitOutput(c, put)
	c.stop(os.Interrupt)
	f = h.check(put, maybe)
	if f.Duplicates != 0 {
		t.Errorf("second run: %v: want every record exactly once across two clean Ctrl-C stops", f)
	}
	h.checkLeases(maxSeq)
	h.checkLog()
}

// hangTransport is an HTTP transport that, once hang is set, holds every
// request until its context is done: a DynamoDB endpoint that went silent.
type hangTransport struct {
	next http.RoundTripper
	hang atomic.Bool
	held atomic.Int64 // requests held
}

func (h *hangTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if h.hang.Load() {
		h.held.Add(1)
		<-req.Context().Done()
		return nil, req.Context().Err()
	}
	return h.next.RoundTrip(req)
}

// TestDrainBoundedDuringDynamoDBHang drains a pipeline with leases while
// its DynamoDB endpoint hangs: the receiver's final checkpoints and lease
// hand-back cannot complete, so Drain(ctx) must give up when ctx expires,
// with a *stream.DrainError naming the receiver that did not stop, and Run
// must return that error too (not hang, not report a clean stop).
func TestDrainBoundedDuringDynamoDBHang(t *testing.T) {
	env := servers.Env(t)
	h := newHarness(t, env, 2)
	out, err := openBatchFile(h.out, "in-process", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	hang := &hangTransport{next: http.DefaultTransport}
	p, _, err := newPipeline(pipelineConfig{
		aws: env.AWSConfig(), kinesisEndpoint: env.KinesisEndpoint, stream: h.stream, table: h.table,
		recovery: recoverylog.NewMemory(), out: out, logger: slog.New(slog.DiscardHandler),
		dynamo: env.DynamoDB(func(o *dynamodb.Options) { o.HTTPClient = &http.Client{Transport: hang} }),
	})
	if err != nil {
		t.Fatal(err)
	}
	runErr := make(chan error, 1)
	go func() { runErr <- p.Run(context.Background()) }()
	prod := newProducer(env.Kinesis(), h.stream)
	if err := prod.putOnce(t.Context(), 50); err != nil {
		t.Fatal(err)
	}
	put, _, _ := prod.snapshot()
	awaitRecords(t, h.out, put, p.Done(), func() string { return "pipeline stopped early" })

	hang.hang.Store(true)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	err = p.Drain(ctx)
	var de *stream.DrainError
	if !errors.As(err, &de) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Drain during a DynamoDB hang = %v, want a *stream.DrainError wrapping context.DeadlineExceeded", err)
	}
	if !slices.Equal(de.Receivers, []int{0}) || !strings.Contains(err.Error(), "receivers of sources [0] not stopped") {
		t.Errorf("Drain error %q: want it to name receiver 0, which could not hand its leases back", err)
	}
	if hang.held.Load() == 0 {
		t.Error("no DynamoDB request was held: the test did not hang DynamoDB")
	}
	<-p.Done()
	if err := <-runErr; !errors.As(err, &de) {
		t.Errorf("Run after a drain that gave up = %v, want the *stream.DrainError", err)
	}
}
