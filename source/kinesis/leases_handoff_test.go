package kinesis_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/source/kinesis"
)

// TestLeasesStealHandsOffWithoutDuplicates has a worker join one that
// reads two shards while records keep coming, with checkpoints a minute
// apart: the joiner asks for a shard, the holder stops reading it, lets
// what it read complete, checkpoints it and hands it off, and the joiner
// reads after that checkpoint. Every record is delivered exactly once.
func TestLeasesStealHandsOffWithoutDuplicates(t *testing.T) {
	t.Parallel()
	const leaseDuration = 2 * time.Second
	f := newFleet(t, 2)
	data := payloads("handoff", 3000)
	slow := func(c *kinesis.Config) { c.Leases.CheckpointInterval = time.Minute }
	w1 := f.start("w1", leaseDuration, slow)
	f.waitFor("w1 holds both leases", func() bool { return len(w1.held()) == 2 })
	f.put(data[:1000])
	f.waitFor("the first records delivered", f.allDelivered(data[:1000]))
	w2 := f.start("w2", leaseDuration, slow)
	f.put(data[1000:2000]) // while w2 asks for a shard and w1 hands it off
	f.waitFor("w2 reads a shard", func() bool { return len(w2.held()) == 1 })
	f.put(data[2000:])
	f.waitFor("every record delivered", f.allDelivered(data))
	dups := 0
	for _, n := range f.delivered() {
		dups += n - 1
	}
	if dups != 0 {
		t.Errorf("%d records of %d delivered twice over a planned hand-off, want none", dups, len(data))
	}
	if n := len(w2.records()); n == 0 {
		t.Errorf("w2 delivered nothing")
	}
	w1.drain(t)
	w2.drain(t)
}

// handOffFault is a lease table client whose first hand-off write (the
// holder removing checkpointOwner) goes wrong: with lost set, the write is
// sent twice, so the second finds the lease changed, as if the asker took
// it meanwhile; else it fails with an error of its own.
type handOffFault struct {
	leasetable.DynamoDBAPI
	lost bool

	mu  sync.Mutex
	hit bool
}

// handOffExpr is the update expression of a hand-off (lease.Table.handOff).
const handOffExpr = "SET #counter = #counter + :one REMOVE #ckptowner"

func (c *handOffFault) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	c.mu.Lock()
	first := !c.hit && aws.ToString(in.UpdateExpression) == handOffExpr
	c.hit = c.hit || first
	c.mu.Unlock()
	switch {
	case !first:
	case c.lost:
		if _, err := c.DynamoDBAPI.UpdateItem(ctx, in, o...); err != nil {
			return nil, err
		}
	default:
		return nil, errors.New("handOffFault: injected failure")
	}
	return c.DynamoDBAPI.UpdateItem(ctx, in, o...)
}

func (c *handOffFault) injected() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hit
}

// logBuffer collects a logger's text output; safe for concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// A hand-off whose lease changed before it was written (the asker took it
// already) is logged as information, since nothing is wrong: the lease is
// where it goes. Before, it was a warning that the hand-off failed. A
// hand-off that fails for another reason still warns.
func TestLeasesHandOffLostLogsInfo(t *testing.T) {
	t.Parallel()
	const (
		failed = `level=WARN msg="kinesis: handing a shard off failed`
		lost   = `level=INFO msg="kinesis: a shard's lease changed before its hand-off was written`
	)
	for _, tc := range []struct {
		name        string
		lost        bool
		want, never string
	}{
		{name: "lease lost", lost: true, want: lost, never: failed},
		{name: "write failed", want: failed, never: lost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFleet(t, 2)
			logs := &logBuffer{}
			db := &handOffFault{lost: tc.lost}
			w1 := f.start("w1", 2*time.Second, func(c *kinesis.Config) {
				c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
				db.DynamoDBAPI = c.Leases.DynamoDB
				c.Leases.DynamoDB = db
			})
			f.waitFor("w1 holds both leases", func() bool { return len(w1.held()) == 2 })
			data := payloads("handofflog", 100)
			f.put(data)
			w2 := f.start("w2", 2*time.Second, nil)
			f.waitFor("w2 reads a shard", func() bool { return len(w2.held()) == 1 })
			f.waitFor("w1 logs the hand-off's outcome", func() bool {
				text := logs.String()
				return strings.Contains(text, tc.want) || strings.Contains(text, tc.never)
			})
			f.waitFor("every record delivered", f.allDelivered(data))
			w2.drain(t)
			w1.drain(t)
			if !db.injected() {
				t.Fatalf("no hand-off write seen (update expression %q): the test injected nothing", handOffExpr)
			}
			text := logs.String()
			if !strings.Contains(text, tc.want) || strings.Contains(text, tc.never) {
				t.Errorf("w1 logged, want %q and not %q:\n%s", tc.want, tc.never, text)
			}
		})
	}
}
