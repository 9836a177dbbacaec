package kinesis_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// A shard stolen towards balance is handed off with its state: a worker
// joins one that counts four shards (snapshots a minute apart, so the
// hand-off's own snapshot is the only one), asks for two of them while
// records keep coming, and the holder stores each one's snapshot before
// its last checkpoint and hands it off. Every key's count is exact after.
func TestLeasesStatePerShardHandedOff(t *testing.T) {
	f := newCountFleet(t, 4)
	f.checkpoint = time.Minute
	f.put()
	a, aDone := f.worker("a")
	f.waitExact("a counts round 1")
	b, bDone := f.worker("b")
	f.put() // while b asks for two shards and a hands them off
	f.waitFor("b holds two leases", func() bool {
		ls, err := f.tryLeases()
		if err != nil {
			return false // the table is not there yet
		}
		n := 0
		for _, l := range ls {
			if l.Owner == "b" && l.CheckpointOwner == "" {
				n++
			}
		}
		return n == 2
	})
	f.put()
	f.waitExact("a and b count rounds 1-3")
	f.drain("b", b, bDone)
	f.drain("a", a, aDone)
}

// stateGetFault is a lease table client whose reads of the shard state
// table fail until the worker has read the lease of shard, once the test
// set it (what a holder does when it learns that another worker asked for
// it), and once more after that. It
// counts the reads of shard's state that succeeded.
type stateGetFault struct {
	*awsdynamodb.Client
	lease, state string

	mu     sync.Mutex
	shard  string // set when the lease is asked for
	seen   bool
	failed int // state reads failed after seen
	loads  int // reads of shard's state that succeeded
}

func (c *stateGetFault) GetItem(ctx context.Context, in *awsdynamodb.GetItemInput, opts ...func(*awsdynamodb.Options)) (*awsdynamodb.GetItemOutput, error) {
	c.mu.Lock()
	switch aws.ToString(in.TableName) {
	case c.state:
		if !c.seen || c.failed < 1 {
			if c.seen {
				c.failed++
			}
			c.mu.Unlock()
			return nil, errors.New("stateGetFault: injected state read failure")
		}
		if k, ok := in.Key["log"].(*ddbtypes.AttributeValueMemberS); ok && strings.Contains(k.Value, c.shard) {
			c.loads++
		}
	case c.lease:
		if k, ok := in.Key["leaseKey"].(*ddbtypes.AttributeValueMemberS); ok && c.shard != "" && k.Value == c.shard {
			defer func() { c.mu.Lock(); c.seen = true; c.mu.Unlock() }()
		}
	}
	c.mu.Unlock()
	return c.Client.GetItem(ctx, in, opts...)
}

// A lease asked for (a steal towards balance) while its holder has not
// loaded its state yet (the load failed and waits to be tried again) is
// handed off at once: the holder read nothing of it. Before, the holder
// ignored the request, loaded the state later, claiming it under the
// lease as asked for, and started a reader that delivered nothing (the
// lease being handed off) until the lease expired on its clock: the shard
// went unread for a lease duration.
func TestLeasesStatePerShardHandOffBeforeLoad(t *testing.T) {
	f := newCountFleet(t, 2)
	f.put()
	db := &stateGetFault{Client: f.env.DynamoDB(), lease: f.table, state: f.table + "-state"}
	a, aDone := f.workerWith("a", db)
	f.waitFor("a holds both leases", func() bool {
		ls, err := f.tryLeases()
		if err != nil {
			return false // the table is not there yet
		}
		n := 0
		for _, l := range ls {
			if l.Owner == "a" {
				n++
			}
		}
		return n == 2
	})
	b, bDone := f.worker("b")
	asked := ""
	f.waitFor("b asks a for a lease", func() bool {
		for shard, l := range f.leases() {
			if l.Owner == "b" && l.CheckpointOwner == "a" {
				asked = shard
				return true
			}
		}
		return false
	})
	db.mu.Lock()
	db.shard = asked
	db.mu.Unlock()
	f.waitExact("a and b count round 1")
	f.put()
	f.waitExact("a and b count rounds 1-2")
	f.drain("b", b, bDone)
	f.drain("a", a, aDone)
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.loads != 0 {
		t.Errorf("a loaded the state of %s %d times after b asked for it, want none: it hands it off unread", asked, db.loads)
	}
}
