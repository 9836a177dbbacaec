package lease

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/weirstream/weir/internal/localaws"
)

// loseAnswers is an SDK HTTP client that sends every request on and, for the
// next n UpdateItems whose body match accepts, throws the answer away and
// fails the round trip with "connection reset by peer": the write is
// applied, its answer lost, and the SDK's retryer sends it again.
type loseAnswers struct {
	next aws.HTTPClient

	mu    sync.Mutex
	n     int
	match func(body string) bool
	lost  int // answers lost so far
}

// lose makes the next n UpdateItems whose body match accepts lose their
// answer.
func (c *loseAnswers) lose(n int, match func(body string) bool) {
	c.mu.Lock()
	c.n, c.match = n, match
	c.mu.Unlock()
}

// Do implements aws.HTTPClient.
func (c *loseAnswers) Do(req *http.Request) (*http.Response, error) {
	if !strings.HasSuffix(req.Header.Get("X-Amz-Target"), ".UpdateItem") || req.Body == nil {
		return c.next.Do(req)
	}
	body, err := io.ReadAll(req.Body)
	_ = req.Body.Close()
	if err != nil {
		return nil, err
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	c.mu.Lock()
	drop := c.n > 0 && c.match(string(body))
	if drop {
		c.n--
	}
	c.mu.Unlock()
	resp, err := c.next.Do(req)
	if err != nil || !drop {
		return resp, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	c.mu.Lock()
	c.lost++
	c.mu.Unlock()
	return nil, &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
}

// answersLost returns how many answers were thrown away.
func (c *loseAnswers) answersLost() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lost
}

// lossyWorker returns a worker on dynalite whose client's answers l can
// lose.
func lossyWorker(t *testing.T, tweak func(*CoordinatorConfig)) (*worker, *loseAnswers) {
	t.Helper()
	l := &loseAnswers{}
	db := servers.Env(t).DynamoDB(func(o *dynamodb.Options) {
		l.next = o.HTTPClient
		o.HTTPClient = l
	})
	if l.next == nil {
		t.Fatal("the local DynamoDB client has no HTTP client to wrap")
	}
	return newWorker(t, localaws.UniqueName(t), "w", db, tweak), l
}

// TestCommitAnswerLost checks that a checkpoint write that was applied but
// whose answer was lost (the SDK's retry then fails its condition, since the
// counter moved) keeps the lease and the checkpoint: the worker recognises
// its own write in the item read back.
func TestCommitAnswerLost(t *testing.T) {
	ctx := t.Context()
	w, l := lossyWorker(t, nil)
	if err := w.c.SyncShards(ctx, shardIDs(1)); err != nil {
		t.Fatal(err)
	}
	w.cycle(ctx)
	shard := ids(shardIDs(1))[0]
	if got := w.held(); len(got) != 1 {
		t.Fatalf("held %v, want %s", got, shard)
	}
	l.lose(1, func(body string) bool { return strings.Contains(body, "#ckpt") })
	if err := w.c.Commit(ctx, shard, "100"); err != nil {
		t.Fatalf("Commit with its answer lost = %v, want nil", err)
	}
	if l.answersLost() != 1 {
		t.Fatalf("%d answers lost, want 1", l.answersLost())
	}
	w.c.deliver()
	if _, lost := w.events(); len(lost) != 0 || !w.c.Holds(shard) {
		t.Fatalf("after a checkpoint whose answer was lost: lost %v, holds %v; want kept", lost, w.c.Holds(shard))
	}
	got := mustGet(t, w.c.Table(), shard)
	if got.Checkpoint != "100" || got.Owner != "w" {
		t.Fatalf("lease after the commit: %+v, want checkpoint 100 owned by w", got)
	}
	// The worker goes on from the counter its write left.
	if err := w.c.Commit(ctx, shard, "200"); err != nil {
		t.Fatalf("next Commit = %v, want nil", err)
	}
	if got := mustGet(t, w.c.Table(), shard); got.Checkpoint != "200" {
		t.Errorf("checkpoint %q after the next commit, want 200", got.Checkpoint)
	}
}

// TestRenewAnswerLost checks that a renewal (RenewEveryLease) that was
// applied but whose answer was lost keeps the lease: the SDK's retry fails
// its condition, and the worker recognises its own write in the item read
// back.
func TestRenewAnswerLost(t *testing.T) {
	ctx := t.Context()
	w, l := lossyWorker(t, func(c *CoordinatorConfig) { c.RenewEveryLease = true })
	if err := w.c.SyncShards(ctx, shardIDs(1)); err != nil {
		t.Fatal(err)
	}
	w.cycle(ctx)
	shard := ids(shardIDs(1))[0]
	before := mustGet(t, w.c.Table(), shard)
	if before.Owner != "w" {
		t.Fatalf("lease %+v, want owned by w", before)
	}
	l.lose(1, func(body string) bool { return strings.Contains(body, `"SET #counter = #counter + :one"`) })
	w.clk.Advance(w.c.cfg.RenewInterval)
	w.c.renewCycle(ctx)
	w.c.deliver()
	if l.answersLost() != 1 {
		t.Fatalf("%d answers lost, want 1", l.answersLost())
	}
	if _, lost := w.events(); len(lost) != 0 || !w.c.Holds(shard) {
		t.Fatalf("after a renewal whose answer was lost: lost %v, holds %v; want kept", lost, w.c.Holds(shard))
	}
	if got := mustGet(t, w.c.Table(), shard); got.Counter != before.Counter+1 || got.Owner != "w" {
		t.Fatalf("lease after the renewal: %+v, want counter %d owned by w", got, before.Counter+1)
	}
	// The lease runs from that renewal: past the first LeaseDuration, it
	// is still held, and the next renewal succeeds on the counter it left.
	w.clk.Advance(testLease - w.c.cfg.RenewInterval)
	w.c.renewCycle(ctx)
	w.c.deliver()
	if _, lost := w.events(); len(lost) != 0 || !w.c.Holds(shard) {
		t.Errorf("after the next renewal: lost %v, holds %v; want kept", lost, w.c.Holds(shard))
	}
}
