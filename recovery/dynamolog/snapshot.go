package dynamolog

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/recovery"
)

// SnapshotChunkSize is the number of snapshot bytes a DynamoDB log puts in
// one item. An item holds at most 400 KB, counting its attribute names and
// values (binary values by their raw length); the rest of a chunk item is
// its key (a partition key of at most about 1.1 KB here) and short names.
const SnapshotChunkSize = 300 << 10

// Items of a snapshot. A snapshot is a partition of its own, named by its
// reference: "<log name>#snapshot/<writer>/<batch time>", so that a zombie
// writer cannot overwrite its successor's. Its chunks are items 1 to n,
// holding the framed snapshot (recovery.FrameSnapshot) in order; item 0,
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
func (l *Log) PutSnapshot(ctx context.Context, t batch.Time, data []byte) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(ctx); err != nil {
		return "", err
	}
	ref := l.name + snapMarker + l.writer + "/" + strconv.FormatInt(int64(t), 10)
	framed := recovery.FrameSnapshot(t, data)
	n := 0
	for off := 0; off < len(framed); off += SnapshotChunkSize {
		n++
		chunk := framed[off:min(off+SnapshotChunkSize, len(framed))]
		if err := l.putSnapItem(ctx, ref, int64(n), map[string]types.AttributeValue{
			attrType: str(itemChunk), attrData: &types.AttributeValueMemberB{Value: chunk}}); err != nil {
			return "", err
		}
	}
	if err := l.putSnapItem(ctx, ref, 0, map[string]types.AttributeValue{
		attrType: str(itemHead), attrChunks: num(int64(n))}); err != nil {
		return "", err
	}
	l.snaps = append(l.snaps, ref)
	return ref, nil
}

// putSnapItem puts a snapshot item, trying again until DynamoDB answers
// (see untilAnswered): the put is unconditional, so a repeat is harmless.
func (l *Log) putSnapItem(ctx context.Context, ref string, seq int64, attrs map[string]types.AttributeValue) error {
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

// GetSnapshot reads the snapshot's items and checks them; see
// recovery.SnapshotStore.
func (l *Log) GetSnapshot(ctx context.Context, ref string) ([]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(ctx); err != nil {
		return nil, err
	}
	want, ok := l.snapTime(ref)
	if !ok {
		return nil, fmt.Errorf("%w: %q is not a snapshot of log %s", recovery.ErrNoSnapshot, ref, l.where())
	}
	items, err := l.queryPartition(ctx, ref)
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
	if int64(len(items)-1) != chunks {
		return nil, corrupt(0, fmt.Errorf("%d chunk items, the head says %d", len(items)-1, chunks))
	}
	var framed []byte
	for i, it := range items[1:] {
		seq, _ := numAttr(it, attrSeq)
		b, ok := it[attrData].(*types.AttributeValueMemberB)
		if seq != int64(i+1) || !ok {
			return nil, corrupt(seq, fmt.Errorf("item %d is not chunk %d", seq, i+1))
		}
		framed = append(framed, b.Value...)
	}
	t, data, err := recovery.UnframeSnapshot(framed)
	if err == nil && t != want {
		err = fmt.Errorf("the items hold the snapshot at %v, the reference says %v", t, want)
	}
	if err != nil {
		return nil, corrupt(0, err)
	}
	return data, nil
}

// snapTime returns the batch time of a snapshot reference of this log.
func (l *Log) snapTime(ref string) (batch.Time, bool) {
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
func (l *Log) queryPartition(ctx context.Context, key string) ([]map[string]types.AttributeValue, error) {
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

// pruneSnapshots deletes the snapshots the entries before a compaction
// (old) referenced, and those this writer put, that are older than the
// current one of the compacted entries (now). A snapshot put by a writer
// that crashed before referencing it is not known here and stays. It only
// tidies up: failures are logged. l.mu is held.
func (l *Log) pruneSnapshots(ctx context.Context, old, now [][]byte) {
	cur, err := recovery.CurrentSnapshot(now)
	if err != nil || cur == nil {
		return
	}
	refs := map[string]bool{}
	if entries, err := recovery.DecodeEntries(old); err == nil {
		for _, e := range entries {
			if e.Kind == recovery.KindSnapshot && e.Ref != "" {
				refs[e.Ref] = true
			}
		}
	}
	for _, ref := range l.snaps {
		refs[ref] = true
	}
	l.snaps = nil
	for ref := range refs {
		t, ok := l.snapTime(ref)
		if !ok || ref == cur.Ref || t >= cur.Time {
			if ok && ref != cur.Ref {
				l.snaps = append(l.snaps, ref)
			}
			continue
		}
		if err := l.deletePartition(ctx, ref); err != nil {
			l.logger.Warn("dynamolog: could not delete an old snapshot; the next compaction will retry",
				"log", l.where(), "snapshot", ref, "err", err)
			l.snaps = append(l.snaps, ref)
		}
	}
}

// deletePartition deletes every item of partition key, 25 to a request.
func (l *Log) deletePartition(ctx context.Context, key string) error {
	items, err := l.queryPartition(ctx, key)
	if err != nil {
		return err
	}
	for len(items) > 0 {
		n := min(len(items), 25)
		reqs := make([]types.WriteRequest, n)
		for i, it := range items[:n] {
			reqs[i] = types.WriteRequest{DeleteRequest: &types.DeleteRequest{
				Key: map[string]types.AttributeValue{attrLog: it[attrLog], attrSeq: it[attrSeq]}}}
		}
		if err := l.batchWrite(ctx, reqs); err != nil {
			return err
		}
		items = items[n:]
	}
	return nil
}
