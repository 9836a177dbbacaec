//go:build unix

package crashtest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/recoverylog"
)

// crash is the instant an in-process pipeline "dies": from then on its log
// appends, DynamoDB calls and output writes fail, as if the process were
// gone.
type crash struct {
	dead atomic.Bool
	once sync.Once
	at   chan struct{} // closed by trigger
	what string        // set before at is closed
}

func newCrash() *crash { return &crash{at: make(chan struct{})} }

// trigger kills the pipeline now; what says where.
func (c *crash) trigger(what string) {
	c.once.Do(func() {
		c.dead.Store(true)
		c.what = what
		close(c.at)
	})
}

// logModel follows the recovery log's appends (through a MemoryStore's
// hook) to know, at any instant, the greatest sequence number of each shard
// whose batch's completion is logged: what a completed-only checkpoint may
// reach, and no further. It outlives the pipelines, as the log does.
type logModel struct {
	mu        sync.Mutex
	blocks    map[batch.BlockID]batch.BlockInfo
	allocs    map[batch.Time][]batch.BlockID
	completed map[string]string // shard -> greatest completed sequence number
	seen      map[recoverylog.Kind]int
}

func newLogModel() *logModel {
	return &logModel{blocks: map[batch.BlockID]batch.BlockInfo{}, allocs: map[batch.Time][]batch.BlockID{},
		completed: map[string]string{}, seen: map[recoverylog.Kind]int{}}
}

// apply records entries that were appended.
func (m *logModel) apply(entries []recoverylog.Entry) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range entries {
		switch e.Kind {
		case recoverylog.KindBlockStored:
			m.blocks[e.Block.ID] = e.Block
			if e.Batch != 0 && !slices.Contains(m.allocs[e.Batch], e.Block.ID) {
				m.allocs[e.Batch] = append(m.allocs[e.Batch], e.Block.ID)
			}
		case recoverylog.KindBatchAllocated:
			for _, id := range e.Blocks {
				if !slices.Contains(m.allocs[e.Time], id) {
					m.allocs[e.Time] = append(m.allocs[e.Time], id)
				}
			}
		case recoverylog.KindBatchCompleted:
			for _, id := range m.allocs[e.Time] {
				for _, r := range m.blocks[id].Ranges {
					m.completed[r.Shard] = batch.MaxSeq(m.completed[r.Shard], r.Last)
				}
			}
		}
	}
}

// records returns the number of records an entry is about: a block's, a
// batch's.
func (m *logModel) records(e recoverylog.Entry) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ids []batch.BlockID
	switch e.Kind {
	case recoverylog.KindBlockStored:
		return e.Block.Count
	case recoverylog.KindBatchAllocated:
		ids = e.Blocks
	case recoverylog.KindBatchCompleted:
		ids = m.allocs[e.Time]
	}
	n := 0
	for _, id := range ids {
		n += m.blocks[id].Count
	}
	return n
}

// count counts one more entry of kind e.Kind with records and returns how
// many there have been.
func (m *logModel) count(e recoverylog.Entry) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seen[e.Kind]++
	return m.seen[e.Kind]
}

// completedSeq returns the greatest completed sequence number of shard.
func (m *logModel) completedSeq(shard string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.completed[shard]
}

// appendCrash is a crash point at an append: the nth append of an entry of
// kind about records crashes the pipeline, keeping the entry in the log
// (keep: the append was durable, the process died right after) or not (it
// died before writing). With after set, only appends made once after
// reports true count.
type appendCrash struct {
	kind  recoverylog.Kind
	nth   int
	keep  bool
	after func() bool
}

// hook returns the MemoryStore hook of one pipeline: it follows the log in
// m and, if at is not nil, crashes c there. Once c is dead every append
// fails, storing nothing.
func hook(m *logModel, c *crash, at *appendCrash) recoverylog.AppendHook {
	return func(_ int, entries []recoverylog.Entry) recoverylog.Fault {
		if c.dead.Load() {
			return recoverylog.Fault{Err: errCrashed}
		}
		e := entries[0]
		if at != nil && len(entries) == 1 && e.Kind == at.kind && m.records(e) > 0 &&
			(at.after == nil || at.after()) && m.count(e) == at.nth {
			c.trigger(fmt.Sprintf("append %v (kept: %v)", e, at.keep))
			if at.keep {
				m.apply(entries)
				return recoverylog.Fault{Err: errCrashed, Keep: 1}
			}
			return recoverylog.Fault{Err: errCrashed}
		}
		m.apply(entries)
		return recoverylog.Fault{}
	}
}

// ddbSpy wraps the lease table's DynamoDB client. It fails every call once
// its pipeline crashed; it inspects every checkpoint write: one passing the
// completed records (as the log model knows them) is a violation of G4,
// whatever the recovery log (not checked with model nil: a pipeline without
// a log); with crashPastCompletion, the first successful
// one that passes them crashes the pipeline just after it.
type ddbSpy struct {
	next                *dynamodb.Client
	model               *logModel
	crash               *crash
	crashPastCompletion bool
	crashAfterCommit    int // > 0: crash after this many successful checkpoint writes
	// journal, if not nil, gets a line for every checkpoint write (see
	// journal), for a parent process to check.
	journal *journal
	// worker, if set with journal, is the worker's ID: the spy reads the
	// lease before each checkpoint write, and journals a write that
	// succeeded while the lease named another owner (a zombie's).
	worker string

	mu         sync.Mutex
	commits    int
	violations []string
}

func (d *ddbSpy) CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, o ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	if d.crash.dead.Load() {
		return nil, errCrashed
	}
	return d.next.CreateTable(ctx, in, o...)
}

func (d *ddbSpy) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, o ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	if d.crash.dead.Load() {
		return nil, errCrashed
	}
	return d.next.DescribeTable(ctx, in, o...)
}

func (d *ddbSpy) Scan(ctx context.Context, in *dynamodb.ScanInput, o ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	if d.crash.dead.Load() {
		return nil, errCrashed
	}
	return d.next.Scan(ctx, in, o...)
}

func (d *ddbSpy) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if d.crash.dead.Load() {
		return nil, errCrashed
	}
	return d.next.GetItem(ctx, in, o...)
}

func (d *ddbSpy) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if d.crash.dead.Load() {
		return nil, errCrashed
	}
	return d.next.PutItem(ctx, in, o...)
}

// BatchWriteItem is the state per shard store's (a reader with
// Deduplicate, see envDedupe).
func (d *ddbSpy) BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	if d.crash.dead.Load() {
		return nil, errCrashed
	}
	return d.next.BatchWriteItem(ctx, in, o...)
}

func (d *ddbSpy) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	if d.crash.dead.Load() {
		return nil, errCrashed
	}
	return d.next.DeleteItem(ctx, in, o...)
}

// UpdateItem inspects checkpoint writes (those setting :ckpt to a sequence
// number) around the real call.
func (d *ddbSpy) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if d.crash.dead.Load() {
		return nil, errCrashed
	}
	shard, seq := checkpointOf(in)
	if seq == "" {
		return d.next.UpdateItem(ctx, in, o...)
	}
	owner, known := d.ownerBefore(ctx, in, o)
	var done string
	past := false
	if d.model != nil {
		done = d.model.completedSeq(shard)
		past = done == "" || batch.CompareSeq(seq, done) > 0
	}
	if past {
		v := fmt.Sprintf("shard %s checkpointed at %s, past its completed records (up to %q) (G4)", shard, seq, done)
		d.mu.Lock()
		d.violations = append(d.violations, v)
		d.mu.Unlock()
		d.journal.add(journalPast, v)
	}
	out, err := d.next.UpdateItem(ctx, in, o...)
	if err != nil {
		return out, err
	}
	d.journal.add(journalCommit, shard+" "+seq)
	if known && owner != d.worker {
		d.journal.add(journalZombie, fmt.Sprintf("shard %s checkpointed at %s by %s while the lease table named %q its owner", shard, seq, d.worker, owner))
	}
	d.mu.Lock()
	d.commits++
	n := d.commits
	d.mu.Unlock()
	switch {
	case past && d.crashPastCompletion:
		d.crash.trigger(fmt.Sprintf("checkpoint of shard %s at %s committed, past its completed records (up to %q)", shard, seq, done))
	case d.crashAfterCommit > 0 && n == d.crashAfterCommit:
		d.crash.trigger(fmt.Sprintf("checkpoint %d, of shard %s at %s, committed", n, shard, seq))
	}
	return out, nil
}

// ownerBefore reads the owner of the lease a checkpoint write in is about
// (consistently: the last write before the read), its checkpointOwner
// during a hand-off, if d journals with a
// worker ID; known is false if it does not or the read failed. A
// conditional checkpoint succeeds only if the lease is still the writer's,
// so a write that succeeds after the read named another owner is a
// zombie's: the lease was taken from it and it did not take it back.
// The read gets the write's options (the lease table's attempt timeout).
func (d *ddbSpy) ownerBefore(ctx context.Context, in *dynamodb.UpdateItemInput, o []func(*dynamodb.Options)) (owner string, known bool) {
	if d.journal == nil || d.worker == "" {
		return "", false
	}
	out, err := d.next.GetItem(ctx, &dynamodb.GetItemInput{TableName: in.TableName, Key: in.Key, ConsistentRead: aws.Bool(true)}, o...)
	if err != nil || out.Item == nil {
		return "", false
	}
	if v, ok := out.Item["leaseOwner"].(*types.AttributeValueMemberS); ok {
		owner = v.Value
	}
	// During a graceful hand-off (KCL 3.x) leaseOwner already names the
	// next owner, and checkpointOwner the holder, whose last checkpoint it
	// is to write.
	if v, ok := out.Item["checkpointOwner"].(*types.AttributeValueMemberS); ok && v.Value != "" {
		owner = v.Value
	}
	return owner, true
}

// checkpointOf returns the shard and sequence number a checkpoint write
// sets, or "" for another update (a renewal, a take, SHARD_END).
func checkpointOf(in *dynamodb.UpdateItemInput) (shard, seq string) {
	v, ok := in.ExpressionAttributeValues[":ckpt"].(*types.AttributeValueMemberS)
	if !ok || batch.ValidateSeq(v.Value) != nil {
		return "", ""
	}
	k, ok := in.Key["leaseKey"].(*types.AttributeValueMemberS)
	if !ok {
		return "", ""
	}
	return k.Value, v.Value
}

// stats returns the successful checkpoint writes and the violations seen.
func (d *ddbSpy) stats() (commits int, violations []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.commits, append([]string(nil), d.violations...)
}
