package kinesis_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// loadGate is a lease table client whose reads of a shard's state wait
// until the test opens the shard (a slow state load).
type loadGate struct {
	*awsdynamodb.Client
	lease, state string

	mu      sync.Mutex
	open    map[string]bool
	opened  chan struct{}  // closed and replaced when a shard opens
	waiting map[string]int // by shard, state reads waiting
}

func newLoadGate(f *countFleet) *loadGate {
	return &loadGate{Client: f.env.DynamoDB(), lease: f.table, state: f.table + "-state",
		open: map[string]bool{}, opened: make(chan struct{}), waiting: map[string]int{}}
}

func (c *loadGate) GetItem(ctx context.Context, in *awsdynamodb.GetItemInput, opts ...func(*awsdynamodb.Options)) (*awsdynamodb.GetItemOutput, error) {
	if aws.ToString(in.TableName) == c.state {
		// A head item (shardstate/app/stream/shard); a snapshot's chunks
		// are read after it.
		if k, ok := in.Key["log"].(*ddbtypes.AttributeValueMemberS); ok && strings.HasPrefix(k.Value, "shardstate/") {
			if err := c.wait(ctx, k.Value[strings.LastIndex(k.Value, "/")+1:]); err != nil {
				return nil, err
			}
		}
	}
	return c.Client.GetItem(ctx, in, opts...)
}

// wait waits until shard is open.
func (c *loadGate) wait(ctx context.Context, shard string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for !c.open[shard] {
		c.waiting[shard]++
		opened := c.opened
		c.mu.Unlock()
		select {
		case <-opened:
		case <-ctx.Done():
		}
		c.mu.Lock()
		c.waiting[shard]--
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}

// loading returns the shards whose state reads wait.
func (c *loadGate) loading() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for shard, n := range c.waiting {
		if n > 0 {
			out = append(out, shard)
		}
	}
	return out
}

// let lets shard's state reads through.
func (c *loadGate) let(shard string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.open[shard] = true
	close(c.opened)
	c.opened = make(chan struct{})
}

// askerReads is a lease table client that counts its consistent reads of
// one lease (an asker's look at a lease it asked for, once per take
// cycle) from when shard is set until one shows the lease handed off.
type askerReads struct {
	*awsdynamodb.Client
	lease string

	mu     sync.Mutex
	shard  string
	reads  int
	handed bool // a read showed shard handed off
}

func (c *askerReads) GetItem(ctx context.Context, in *awsdynamodb.GetItemInput, opts ...func(*awsdynamodb.Options)) (*awsdynamodb.GetItemOutput, error) {
	out, err := c.Client.GetItem(ctx, in, opts...)
	k, ok := in.Key["leaseKey"].(*ddbtypes.AttributeValueMemberS)
	if !ok || aws.ToString(in.TableName) != c.lease || !aws.ToBool(in.ConsistentRead) {
		return out, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.shard == "" || k.Value != c.shard || c.handed {
		return out, err
	}
	c.reads++
	if err == nil && out.Item != nil {
		_, asked := out.Item["checkpointOwner"]
		c.handed = !asked
	}
	return out, err
}

func (c *askerReads) count(shard string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.shard = shard
}

func (c *askerReads) result() (reads int, handed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads, c.handed
}

// A lease asked for (a steal towards balance) while its holder loads
// the shard's state, or has the load still to do after another shard's,
// is handed off at once: the load is abandoned, or not started. Before,
// the assigner handled the request only after every load it had in hand,
// however long they took; past a lease duration the holder lost the lease
// on its clock and it was handed off only then (by the lease
// coordinator's scan), the shard read by no one meanwhile. Here the
// holder's state reads wait (a slow load) until the asker saw the lease
// handed off, except, if the shard asked for is to be loaded second, the
// first shard's: the asker must see it handed off within two of its take
// cycles (lease reads) of the holder learning of the request, where a
// lease duration is three.
func TestLeasesStatePerShardHandOffDuringLoad(t *testing.T) {
	t.Parallel()
	f := newCountFleet(t, 2)
	// Take cycles of 2 s, so that two leave time for the hand-off's
	// writes on a busy machine.
	f.lease = 6 * time.Second
	f.put()
	logs := &logBuffer{}
	f.logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	gate := newLoadGate(f)
	a, aDone := f.workerWith("a", gate)
	f.logger = nil
	f.waitFor("a holds both leases and loads a state", func() bool { return f.holding("a") == 2 && len(gate.loading()) == 1 })
	first := gate.loading()[0]
	reads := &askerReads{Client: f.env.DynamoDB(), lease: f.table}
	b, bDone := f.workerWith("b", reads)
	asked := f.awaitAsk("b", "a")
	f.waitFor("a learns of the request", func() bool {
		return strings.Contains(logs.String(), `msg="leasetable: another worker asked for a lease`)
	})
	reads.count(asked)
	t.Logf("b asked for %s; a loads it first: %v", asked, asked == first)
	if asked != first {
		gate.let(first)
	}
	// b may have read the lease handed off before the count began, and
	// then reads it no more: the table showing it b's, no longer asked
	// for, does too.
	f.waitFor("b sees the lease handed off", func() bool {
		if _, handed := reads.result(); handed {
			return true
		}
		l, ok := f.leases()[asked]
		return ok && l.Owner == "b" && l.CheckpointOwner == ""
	})
	for shard := range f.leases() {
		gate.let(shard)
	}
	f.waitExact("a and b count round 1")
	f.put()
	f.waitExact("a and b count rounds 1-2")
	f.drain("b", b, bDone)
	f.drain("a", a, aDone)

	n, _ := reads.result()
	t.Logf("b read lease %s %d times until it saw it handed off", asked, n)
	if n > 2 {
		t.Errorf("b read lease %s %d times (take cycles) until a handed it off, want at most 2", asked, n)
	}
	for line := range strings.Lines(logs.String()) {
		if strings.Contains(line, `msg="leasetable: lease lost"`) && strings.Contains(line, "shard="+asked+" ") {
			t.Errorf("a lost the lease asked for instead of handing it off: %s", line)
		}
	}
}
