package dynamolog

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/dynamochunk"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/recovery"
)

// SnapshotChunkSize is the number of snapshot bytes a DynamoDB log puts in
// one item: an item holds at most 400 KB, with its key and attribute names.
const SnapshotChunkSize = dynamochunk.Size

// Items of a snapshot. A snapshot is a partition of its own, named by its
// reference: "<log name>#snapshot/<writer>/<batch time>", so that a zombie
// writer cannot overwrite its successor's. Its chunks are items 1 to n,
// holding the snapshot's bytes (framed by the driver) in order; item 0,
// put last, holds n and marks the snapshot whole.
const (
	snapMarker = "#snapshot/"
	itemChunk  = "chunk"
	itemHead   = "head"
	attrData   = "data"   // chunk items: the bytes
	attrChunks = "chunks" // the head item: the number of chunks
)

// PutSnapshot puts the snapshot's chunks, then its head item; see
// recovery.SnapshotStore. Snapshot items are not fenced: they are in a
// partition of this writer's, and only an entry a fenced append would put
// makes them current. A failed put leaves the log usable.
//
// The puts are made without l.mu, which guards the log's items and seqs
// only, so that appends (a block, a batch) do not wait for the upload of a
// large state: the snapshot's items are under a key of their own that no
// append, read or compaction touches, and that nothing reads before the
// driver appends an entry naming it, after PutSnapshot has returned.
// l.snapMu keeps the snapshot calls from running into one another: two
// puts at one time would mix their chunks, and a prune could delete the
// items of a put under way.
func (l *dynamoLog) PutSnapshot(ctx context.Context, t batch.Time, data []byte) (string, error) {
	l.snapMu.Lock()
	defer l.snapMu.Unlock()
	l.mu.Lock()
	err := l.usable(ctx)
	l.mu.Unlock()
	if err != nil {
		return "", err
	}
	ref := l.name + snapMarker + l.writer + "/" + strconv.FormatInt(int64(t), 10)
	chunks := dynamochunk.Split(data)
	for i, chunk := range chunks {
		if err := l.putSnapItem(ctx, ref, int64(i+1), map[string]types.AttributeValue{
			attrType: str(itemChunk), attrData: &types.AttributeValueMemberB{Value: chunk}}); err != nil {
			return "", err
		}
	}
	if err := l.putSnapItem(ctx, ref, 0, map[string]types.AttributeValue{
		attrType: str(itemHead), attrChunks: num(int64(len(chunks)))}); err != nil {
		return "", err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		// Closed during the puts: the snapshot is left unreferenced, as
		// a crash between its put and its entry leaves it.
		return "", recovery.ErrClosed
	}
	l.snaps = append(l.snaps, ref)
	return ref, nil
}

// putSnapItem puts a snapshot item, trying again until DynamoDB answers
// (see untilAnswered): the put is unconditional, so a repeat is harmless.
func (l *dynamoLog) putSnapItem(ctx context.Context, ref string, seq int64, attrs map[string]types.AttributeValue) error {
	attrs[attrLog], attrs[attrSeq], attrs[attrWriter] = str(ref), num(seq), str(l.writer)
	err := l.untilAnswered(ctx, ref+"#"+strconv.FormatInt(seq, 10), func() error {
		_, err := l.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(l.table), Item: attrs})
		return err
	})
	if err != nil {
		return fmt.Errorf("dynamolog: put snapshot %s item %d: %w", ref, seq, err)
	}
	return nil
}

// GetSnapshot reads the snapshot's items and checks that they are whole; see
// recovery.SnapshotStore.
func (l *dynamoLog) GetSnapshot(ctx context.Context, ref string) ([]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(ctx); err != nil {
		return nil, err
	}
	_, ok := l.snapTime(ref)
	if !ok {
		return nil, fmt.Errorf("%w: %q is not a snapshot of log %s", recovery.ErrNoSnapshot, ref, l.where())
	}
	// Read at a restart, as the log is at Open: tried again until
	// DynamoDB answers.
	var items []map[string]types.AttributeValue
	err := l.untilAnswered(ctx, ref, func() (err error) {
		items, err = l.queryPartition(ctx, ref)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("dynamolog: read snapshot %s: %w", ref, err)
	}
	where := "dynamodb:" + l.table + "/" + ref
	if len(items) == 0 {
		return nil, fmt.Errorf("%w: %s", recovery.ErrNoSnapshot, where)
	}
	corrupt := func(seq int64, err error) error { return &recovery.CorruptError{Path: where, Offset: seq, Err: err} }
	head, err := numAttr(items[0], attrSeq)
	if err != nil || head != 0 {
		return nil, corrupt(0, errors.New("no head item: the snapshot was not written whole"))
	}
	chunks, err := numAttr(items[0], attrChunks)
	if err != nil {
		return nil, corrupt(0, err)
	}
	// Chunks past the head's count are left by a larger snapshot stored
	// before at the same time, which this one replaced.
	if chunks < 0 || int64(len(items)-1) < chunks {
		return nil, corrupt(0, fmt.Errorf("%d chunk items, the head says %d", len(items)-1, chunks))
	}
	framed, bad, err := dynamochunk.Join(items[1:1+chunks], attrSeq, attrData)
	if err != nil {
		return nil, corrupt(bad, err)
	}
	return framed, nil
}

// snapTime returns the batch time of a snapshot reference of this log.
func (l *dynamoLog) snapTime(ref string) (batch.Time, bool) {
	rest, ok := strings.CutPrefix(ref, l.name+snapMarker)
	if !ok {
		return 0, false
	}
	i := strings.LastIndexByte(rest, '/')
	if i < 0 {
		return 0, false
	}
	t, err := strconv.ParseInt(rest[i+1:], 10, 64)
	return batch.Time(t), err == nil
}

// queryPartition returns the items of partition key, in seq order.
func (l *dynamoLog) queryPartition(ctx context.Context, key string) ([]map[string]types.AttributeValue, error) {
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(l.table),
		KeyConditionExpression:    aws.String("#l = :l"),
		ExpressionAttributeNames:  map[string]string{"#l": attrLog},
		ExpressionAttributeValues: map[string]types.AttributeValue{":l": str(key)},
		ConsistentRead:            aws.Bool(true),
	}
	var items []map[string]types.AttributeValue
	for {
		out, err := l.client.Query(ctx, in)
		if err != nil {
			return nil, err
		}
		items = append(items, out.Items...)
		if len(out.LastEvaluatedKey) == 0 {
			return items, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// noteSnapshots adds the snapshots the records before a Replace (old)
// referenced to those PruneSnapshots considers. l.mu is held.
func (l *dynamoLog) noteSnapshots(old [][]byte) {
	entries, err := recoverylog.DecodeEntries(old)
	if err != nil {
		return // they decoded when read or appended
	}
	for _, e := range entries {
		if e.Kind == recoverylog.KindSnapshot && e.Ref != "" && !slices.Contains(l.snaps, e.Ref) {
			l.snaps = append(l.snaps, e.Ref)
		}
	}
}

// PruneSnapshots deletes the snapshots older than t but ref's among those
// the records replaced so far referenced and those this writer put; see
// recovery.SnapshotStore. A snapshot put by a writer that crashed before
// referencing it is not known here and stays. A snapshot it cannot delete
// is tried again by the next call.
func (l *dynamoLog) PruneSnapshots(ctx context.Context, t batch.Time, ref string) error {
	l.snapMu.Lock()
	defer l.snapMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(ctx); err != nil {
		return err
	}
	refs := l.snaps
	l.snaps = nil
	var errs []error
	for _, r := range refs {
		st, ok := l.snapTime(r)
		if !ok || r == ref || st >= t {
			if ok && r != ref {
				l.snaps = append(l.snaps, r)
			}
			continue
		}
		if err := l.deletePartition(ctx, r); err != nil {
			errs = append(errs, fmt.Errorf("dynamolog: delete old snapshot %s of log %s: %w", r, l.where(), err))
			l.snaps = append(l.snaps, r)
		}
	}
	return errors.Join(errs...)
}

// deletePartition deletes every item of partition key, 25 to a request.
func (l *dynamoLog) deletePartition(ctx context.Context, key string) error {
	items, err := l.queryPartition(ctx, key)
	if err != nil {
		return err
	}
	keys := make([]map[string]types.AttributeValue, len(items))
	for i, it := range items {
		keys[i] = map[string]types.AttributeValue{attrLog: it[attrLog], attrSeq: it[attrSeq]}
	}
	return dynamochunk.DeleteKeys(ctx, l.client, l.clock, l.table, keys)
}
