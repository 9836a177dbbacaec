package lease

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/weirstream/weir/internal/checkpointer"
	"github.com/weirstream/weir/internal/localaws"
)

// step is what loseAnswers does to one request.
type step int

const (
	sentKept step = iota // sent on and answered, as without the plan
	sentLost             // sent on, its answer thrown away
	notSent              // never sent
)

// loseAnswers is an SDK HTTP client that sends requests on, except that
// UpdateItems are taken through the steps of its plan one by one while
// match accepts their body: sentLost applies the write and loses its
// answer, notSent fails before sending; both fail the round trip with
// "connection reset by peer", which the SDK's retryer retries. Steps
// past the SDK's attempts are left over: plan(nil) ends them.
type loseAnswers struct {
	next aws.HTTPClient

	mu    sync.Mutex
	steps []step
	match func(body string) bool
	lost  int      // answers lost so far
	sent  []string // the bodies of the UpdateItems sent on
}

// plan sets the steps for the next UpdateItems whose body match accepts;
// plan(nil) ends them.
func (c *loseAnswers) plan(match func(body string) bool, steps ...step) {
	c.mu.Lock()
	c.steps, c.match = steps, match
	c.mu.Unlock()
}

// lose makes the next UpdateItem whose body match accepts lose its answer.
func (c *loseAnswers) lose(match func(body string) bool) { c.plan(match, sentLost) }

// unanswered makes the next write whose body match accepts get no answer:
// its first attempt is applied, its answer lost, and no retry reaches
// DynamoDB. Call plan(nil) once it failed.
func (c *loseAnswers) unanswered(match func(body string) bool) {
	c.plan(match, append([]step{sentLost}, unsent()...)...)
}

// unsent returns more notSent steps than the SDK makes attempts.
func unsent() []step { return slices.Repeat([]step{notSent}, 10) }

// errReset is the error of a round trip loseAnswers cut.
var errReset = &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}

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
	st := sentKept
	if len(c.steps) > 0 && c.match(string(body)) {
		st, c.steps = c.steps[0], c.steps[1:]
	}
	c.mu.Unlock()
	if st == notSent {
		return nil, errReset
	}
	c.mu.Lock()
	c.sent = append(c.sent, string(body))
	c.mu.Unlock()
	resp, err := c.next.Do(req)
	if err != nil || st == sentKept {
		return resp, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	c.mu.Lock()
	c.lost++
	c.mu.Unlock()
	return nil, errReset
}

// sentMatching returns how many UpdateItems whose body match accepts were
// sent on, applied or not.
func (c *loseAnswers) sentMatching(match func(body string) bool) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, b := range c.sent {
		if match(b) {
			n++
		}
	}
	return n
}

// answersLost returns how many answers were thrown away.
func (c *loseAnswers) answersLost() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lost
}

// lossyWorker returns a worker on dynalite whose client's answers l can
// lose, after one take cycle over shards new shards.
func lossyWorker(t *testing.T, shards int, tweak func(*CoordinatorConfig)) (*worker, *loseAnswers) {
	t.Helper()
	l := &loseAnswers{}
	db := servers.Env(t).DynamoDB(func(o *dynamodb.Options) {
		l.next = o.HTTPClient
		o.HTTPClient = l
	})
	if l.next == nil {
		t.Fatal("the local DynamoDB client has no HTTP client to wrap")
	}
	w := newWorker(t, localaws.UniqueName(t), "w", db, tweak)
	if err := w.c.SyncShards(t.Context(), shardIDs(shards)); err != nil {
		t.Fatal(err)
	}
	w.cycle(t.Context())
	return w, l
}

// Matches of the bodies of a checkpoint and a renewal, for loseAnswers.
func isCheckpointBody(body string) bool { return strings.Contains(body, "#ckpt") }
func isRenewBody(body string) bool {
	return strings.Contains(body, `"SET #counter = #counter + :one"`)
}

// TestCommitAnswerLost checks that a checkpoint write that was applied but
// whose answer was lost (the SDK's retry then fails its condition, since the
// counter moved) keeps the lease and the checkpoint: the worker recognises
// its own write in the item read back.
func TestCommitAnswerLost(t *testing.T) {
	ctx := t.Context()
	w, l := lossyWorker(t, 1, nil)
	shard := ids(shardIDs(1))[0]
	if got := w.held(); len(got) != 1 {
		t.Fatalf("held %v, want %s", got, shard)
	}
	l.lose(isCheckpointBody)
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
	w, l := lossyWorker(t, 1, func(c *CoordinatorConfig) { c.RenewEveryLease = true })
	shard := ids(shardIDs(1))[0]
	before := mustGet(t, w.c.Table(), shard)
	if before.Owner != "w" {
		t.Fatalf("lease %+v, want owned by w", before)
	}
	l.lose(isRenewBody)
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

// TestCommitUnansweredThenNext checks that a checkpoint write that got no
// answer at all (applied, then no retry reached DynamoDB) does not cost the
// lease at the next checkpoint, which its condition refuses: the worker
// recognises the earlier write in the item read back and writes the next
// checkpoint on the lease it left.
func TestCommitUnansweredThenNext(t *testing.T) {
	ctx := t.Context()
	w, l := lossyWorker(t, 1, nil)
	shard := ids(shardIDs(1))[0]
	l.unanswered(isCheckpointBody)
	if err := w.c.Commit(ctx, shard, "100"); err == nil || errors.Is(err, checkpointer.ErrLeaseLost) {
		t.Fatalf("Commit without an answer = %v, want an error other than ErrLeaseLost", err)
	}
	l.plan(nil)
	if got := mustGet(t, w.c.Table(), shard); got.Checkpoint != "100" || l.answersLost() != 1 {
		t.Fatalf("checkpoint %q after %d answers lost, want 100 after 1 (applied)", got.Checkpoint, l.answersLost())
	}
	if err := w.c.Commit(ctx, shard, "200"); err != nil {
		t.Fatalf("next Commit = %v, want nil", err)
	}
	w.c.deliver()
	if _, lost := w.events(); len(lost) != 0 || !w.c.Holds(shard) {
		t.Fatalf("after the next checkpoint: lost %v, holds %v; want kept", lost, w.c.Holds(shard))
	}
	if got := mustGet(t, w.c.Table(), shard); got.Checkpoint != "200" || got.Owner != "w" {
		t.Errorf("lease after the next commit: %+v, want checkpoint 200 owned by w", got)
	}
}

// TestCommitUnsentThenAnswerLost checks that a checkpoint write that
// never reached DynamoDB, followed by one applied whose answer was lost,
// keeps the lease without writing the second checkpoint again: the lease
// read back holds the number this very call wrote, and a checkpoint is
// never written twice.
func TestCommitUnsentThenAnswerLost(t *testing.T) {
	ctx := t.Context()
	w, l := lossyWorker(t, 1, nil)
	shard := ids(shardIDs(1))[0]
	l.plan(isCheckpointBody, unsent()...)
	if err := w.c.Commit(ctx, shard, "100"); err == nil || errors.Is(err, checkpointer.ErrLeaseLost) {
		t.Fatalf("Commit never sent = %v, want an error other than ErrLeaseLost", err)
	}
	l.lose(isCheckpointBody)
	if err := w.c.Commit(ctx, shard, "200"); err != nil {
		t.Fatalf("Commit whose answer was lost = %v, want nil", err)
	}
	l.plan(nil)
	w.c.deliver()
	if _, lost := w.events(); len(lost) != 0 || !w.c.Holds(shard) {
		t.Fatalf("lost %v, holds %v; want kept", lost, w.c.Holds(shard))
	}
	// The write applied, and the SDK's retry of it, refused.
	if n := l.sentMatching(func(b string) bool { return isCheckpointBody(b) && strings.Contains(b, `"200"`) }); n != 2 {
		t.Errorf("checkpoint 200 sent %d times, want 2 (applied, then its retry refused): written again", n)
	}
}

// TestRenewUnansweredThenNext checks that a renewal (RenewEveryLease)
// that got no answer at all is recognised by the next renewal, which its
// condition refuses, and that the lease then runs from when the earlier
// one was sent, not from the later one: which write landed, and when, is
// not known, and other workers count from when they saw the counter move.
// The lease is renewed again at once; here that write never arrives either,
// so the lease lapses a lease duration after the first renewal was sent.
func TestRenewUnansweredThenNext(t *testing.T) {
	ctx := t.Context()
	w, l := lossyWorker(t, 1, func(c *CoordinatorConfig) { c.RenewEveryLease = true })
	shard := ids(shardIDs(1))[0]
	before := mustGet(t, w.c.Table(), shard)

	w.clk.Advance(w.c.cfg.RenewInterval)
	first := w.clk.Now()
	l.unanswered(isRenewBody)
	w.c.renewCycle(ctx)
	l.plan(nil)
	if got := mustGet(t, w.c.Table(), shard); got.Counter != before.Counter+1 || l.answersLost() != 1 {
		t.Fatalf("counter %d after %d answers lost, want %d after 1 (applied)", got.Counter, l.answersLost(), before.Counter+1)
	}

	// The next renewal is refused, recognises the first, and renews again:
	// that write never arrives.
	w.clk.Advance(w.c.cfg.RenewInterval)
	l.plan(isRenewBody, append([]step{sentKept}, unsent()...)...)
	w.c.renewCycle(ctx)
	l.plan(nil)
	w.c.deliver()
	if _, lost := w.events(); len(lost) != 0 || !w.c.Holds(shard) {
		t.Fatalf("after the second renewal: lost %v, holds %v; want kept", lost, w.c.Holds(shard))
	}
	w.clk.Set(first.Add(testLease))
	if w.c.Holds(shard) {
		t.Errorf("a lease duration after the first renewal was sent, the lease is still trusted: it was counted from a later write")
	}
}

// isBeatBody matches the body of a beat on the board.
func isBeatBody(body string) bool { return strings.Contains(body, `"ADD #a0 :one`) }

// beatingWorker returns a worker on dynalite whose answers l can lose,
// holding shards leases and past its first beat.
func beatingWorker(t *testing.T, shards int) (*worker, *loseAnswers) {
	t.Helper()
	ctx := t.Context()
	w, l := lossyWorker(t, shards, nil)
	for range 2 {
		w.clk.Advance(w.c.cfg.RenewInterval)
		w.cycle(ctx)
	}
	if got := w.held(); len(got) != shards || w.c.myBeat == 0 {
		t.Fatalf("held %v, beat %d; want %d leases and a beat", got, w.c.myBeat, shards)
	}
	return w, l
}

// TestBeatAnswerLost checks that a beat that was applied but whose answer
// was lost (the SDK's retry then fails its condition, since the beat
// moved) is recognised as this worker's own: the incarnation goes on, no
// lease is renewed on its own (a refused beat's cure, one write per
// lease), and the leases stay held.
func TestBeatAnswerLost(t *testing.T) {
	ctx := t.Context()
	w, l := beatingWorker(t, 3)
	name, before, renewed := w.c.beatName, w.c.myBeat, l.sentMatching(isRenewBody)
	l.lose(isBeatBody)
	w.clk.Advance(w.c.cfg.RenewInterval)
	w.c.renewCycle(ctx)
	w.c.deliver()
	if l.answersLost() != 1 {
		t.Fatalf("%d answers lost, want 1", l.answersLost())
	}
	if n := l.sentMatching(isRenewBody) - renewed; n != 0 {
		t.Errorf("%d renewals sent after a beat whose answer was lost, want 0", n)
	}
	if w.c.beatName != name || w.c.myBeat <= before+1 {
		t.Errorf("beat %s at %d after %s at %d: want the same incarnation, beaten past %d", w.c.beatName, w.c.myBeat, name, before, before+1)
	}
	if _, lost := w.events(); len(lost) != 0 || len(w.held()) != 3 {
		t.Errorf("lost %v, held %v; want all kept", lost, w.held())
	}
	for _, s := range w.held() {
		if !w.c.Holds(s) {
			t.Errorf("%s not trusted (%v) after the beat", s, w.c.HoldOf(s))
		}
	}
}

// TestBeatUnansweredThenNext checks that a beat that got no answer at all
// (applied, then no retry reached DynamoDB) is recognised by the next
// beat, which its condition refuses: the incarnation goes on and no lease
// is renewed on its own.
func TestBeatUnansweredThenNext(t *testing.T) {
	ctx := t.Context()
	w, l := beatingWorker(t, 3)
	name, renewed := w.c.beatName, l.sentMatching(isRenewBody)
	l.unanswered(isBeatBody)
	w.clk.Advance(w.c.cfg.RenewInterval)
	w.c.renewCycle(ctx)
	l.plan(nil)
	w.clk.Advance(w.c.cfg.RenewInterval)
	w.c.renewCycle(ctx)
	w.c.deliver()
	if n := l.sentMatching(isRenewBody) - renewed; n != 0 {
		t.Errorf("%d renewals sent after a beat without an answer, want 0", n)
	}
	if w.c.beatName != name {
		t.Errorf("incarnation %s after %s, want the same", w.c.beatName, name)
	}
	if _, lost := w.events(); len(lost) != 0 || len(w.held()) != 3 {
		t.Errorf("lost %v, held %v; want all kept", lost, w.held())
	}
}

// TestFirstBeatAnswerLost checks that the first beat of an incarnation
// that was applied but whose answer was lost (the SDK's retry then finds
// the attribute it creates) is not taken for the board's item gone: the
// board and the incarnation are kept, and each lease is renewed once, as
// after any first beat, not again at every period until the next scan.
func TestFirstBeatAnswerLost(t *testing.T) {
	ctx := t.Context()
	w, l := lossyWorker(t, 3, nil) // takes the leases; no beat yet
	if got := w.held(); len(got) != 3 || w.c.beatName != "" {
		t.Fatalf("held %v, incarnation %q; want 3 leases, no beat", got, w.c.beatName)
	}
	board := w.c.board
	l.lose(isBeatBody)
	w.clk.Advance(w.c.cfg.RenewInterval)
	w.c.renewCycle(ctx)
	l.plan(nil)
	if l.answersLost() != 1 {
		t.Fatalf("%d answers lost, want 1", l.answersLost())
	}
	if w.c.board != board || w.c.beatName == "" {
		t.Errorf("board %q, incarnation %q after the first beat's answer was lost; want board %q kept, with the incarnation", w.c.board, w.c.beatName, board)
	}
	w.clk.Advance(w.c.cfg.RenewInterval)
	w.c.renewCycle(ctx)
	w.c.deliver()
	if n := l.sentMatching(isRenewBody); n != 3 {
		t.Errorf("%d renewals sent over two periods, want 3 (each lease once, after the first beat)", n)
	}
	if _, lost := w.events(); len(lost) != 0 || len(w.held()) != 3 {
		t.Errorf("lost %v, held %v; want all kept", lost, w.held())
	}
}

// TestUnsureBounded checks that the writes of a lease without a definite
// answer that the lease keeps (heldLease.unsure) are bounded while its
// checkpoints keep failing and beats keep it: renewals of one checkpoint
// count once, and at most maxUnsure checkpoints are kept, the latest,
// which still recognises its own write once a checkpoint lands.
func TestUnsureBounded(t *testing.T) {
	ctx := t.Context()
	f := &faultDB{DynamoDBAPI: servers.Env(t).DynamoDB()}
	w := newWorker(t, localaws.UniqueName(t), "w", f, nil)
	if err := w.c.SyncShards(ctx, shardIDs(1)); err != nil {
		t.Fatal(err)
	}
	w.cycle(ctx)
	shard := ids(shardIDs(1))[0]
	h := w.c.held[shard]
	if h == nil {
		t.Fatalf("held %v, want %s", w.held(), shard)
	}
	isCkpt := func(expr string) bool { return strings.Contains(expr, "#ckpt = :ckpt") }
	const failed = 5 * maxUnsure
	f.setRule(times(failed, failBefore, isCkpt))
	for i := range failed {
		if err := w.c.Commit(ctx, shard, strconv.Itoa(100+i)); err == nil {
			t.Fatalf("Commit %d succeeded, want the injected error", i)
		}
	}
	f.setRule(times(failed, failBefore, isRenew))
	for range failed {
		w.c.renew(ctx, shard, h)
	}
	w.c.mu.Lock()
	n := len(h.unsure)
	w.c.mu.Unlock()
	if n > maxUnsure {
		t.Errorf("%d unanswered writes kept after %d failed checkpoints and %d failed renewals, want at most %d", n, failed, failed, maxUnsure)
	}
	// The latest failed write landed after all, its answer lost: the next
	// checkpoint, refused, recognises it.
	f.setRule(times(1, loseAnswer, isCkpt))
	if err := w.c.Commit(ctx, shard, "1000"); err == nil {
		t.Fatal("Commit with its answer lost succeeded, want the injected error")
	}
	f.setRule(nil)
	if err := w.c.Commit(ctx, shard, "1001"); err != nil {
		t.Fatalf("next Commit = %v, want nil", err)
	}
	w.c.deliver()
	if _, lost := w.events(); len(lost) != 0 {
		t.Errorf("lost %v, want the lease kept", lost)
	}
	if got := mustGet(t, w.c.Table(), shard); got.Checkpoint != "1001" || got.Owner != "w" {
		t.Errorf("lease %+v, want checkpoint 1001 owned by w", got)
	}
}

// TestShardEndReleaseAnswerLost checks that the release of a finished
// shard's lease that was applied but whose answer was lost (the SDK's
// retry then fails its condition) is not reported as a failure: the lease
// is released, and nothing warns.
func TestShardEndReleaseAnswerLost(t *testing.T) {
	ctx := t.Context()
	var logs syncBuf
	w, l := lossyWorker(t, 1, func(c *CoordinatorConfig) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	})
	shard := ids(shardIDs(1))[0]
	// From here: the take's warning that the worker's clock (in 2023) is
	// off DynamoDB's is not the release's.
	before := len(logs.String())
	l.lose(func(body string) bool { return strings.Contains(body, `REMOVE #owner"`) })
	if err := w.c.Commit(ctx, shard, checkpointer.ShardEnd); err != nil {
		t.Fatalf("Commit SHARD_END = %v", err)
	}
	if l.answersLost() != 1 {
		t.Fatalf("%d answers lost, want 1", l.answersLost())
	}
	if got := mustGet(t, w.c.Table(), shard); got.Owner != "" || got.Checkpoint != checkpointer.ShardEnd {
		t.Fatalf("lease %+v, want released at SHARD_END", got)
	}
	if out := logs.String()[before:]; out != "" {
		t.Errorf("a release whose answer was lost logged:\n%s", out)
	}
}
