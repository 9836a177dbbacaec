package shardstate

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"golang.org/x/sync/errgroup"

	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/attempt"
	"github.com/weirstream/weir/internal/dynamochunk"
	"github.com/weirstream/weir/internal/dynamosafe"
)

// Client is the part of *dynamodb.Client a Dynamo store uses.
type Client interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error)
}

// DynamoConfig configures a Store in a DynamoDB table.
type DynamoConfig struct {
	// Client is the DynamoDB client. Required.
	Client Client
	// Table is the table's name. Its key must be log (string, partition)
	// and seq (number, sort), the recovery log table's, so one table can
	// hold both; it must exist. Required.
	Table string
	// Concurrency bounds the chunk reads and writes in flight per Get or
	// Put. Default 16.
	Concurrency int
	// Logger receives the old generations it could not delete: at WARN, or
	// at INFO when a stop (the Put's context cancelled) is the cause.
	// Default slog.Default().
	Logger *slog.Logger
	// Clock paces the retries of batched deletes and times the attempt
	// timeout. Default clock.Real{}.
	Clock clock.Clock
	// AttemptTimeout, when > 0, bounds each attempt of every call: one
	// with no answer by then is abandoned with an error wrapping
	// attempt.ErrTimeout, and retried by the client's retryer, so a silent
	// connection cannot hold a Put, Claim or Get for ever. Default 0:
	// none.
	AttemptTimeout time.Duration
}

// Dynamo is a Store in a DynamoDB table.
//
// Layout: a shard's state has a head item, (log "shardstate/<application>/
// <stream>/<shard>" path-escaped, seq 0), holding the fence, the current
// generation's name, chunk count, size, SHA-256, shape, lease and position.
// A generation is one Put's snapshot: a partition of its own, named
// "<head partition>#<lease counter>-<random>", whose items seq 1 to n hold
// the bytes in chunks of dynamochunk.Size, written in parallel. A Put first
// raises the fence and records the generation as pending in the head (a
// conditional UpdateItem: a fenced writer is refused before it writes a
// byte), then writes the chunks, then switches the head to the generation
// with a conditional PutItem (the fencing rule again), then deletes the
// previous generation and any pending one a crashed Put left. A reader sees
// the head's generation whole: a crash before the switch leaves the previous
// snapshot current; a generation deleted while read is detected (a missing
// chunk and a new head) and the new one read instead.
type Dynamo struct {
	client Client
	table  string
	limit  int
	logger *slog.Logger
	clock  clock.Clock
	opts   []func(*dynamodb.Options) // of every call: the attempt timeout
}

var _ Store = (*Dynamo)(nil)

// NewDynamo returns a Store in cfg.Table.
func NewDynamo(cfg DynamoConfig) (*Dynamo, error) {
	var problems []error
	if cfg.Client == nil {
		problems = append(problems, errors.New("Client nil: set the DynamoDB client"))
	}
	if cfg.Table == "" {
		problems = append(problems, errors.New("Table empty: set the table holding shard states"))
	}
	if cfg.Concurrency < 0 {
		problems = append(problems, fmt.Errorf("Concurrency %d: must be >= 0 (0 means 16)", cfg.Concurrency))
	}
	if cfg.AttemptTimeout < 0 {
		problems = append(problems, fmt.Errorf("AttemptTimeout %v: must be >= 0 (0 means none)", cfg.AttemptTimeout))
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, errors.Join(problems...))
	}
	d := &Dynamo{client: dynamosafe.Wrap(cfg.Client), table: cfg.Table, limit: cmp.Or(cfg.Concurrency, 16),
		logger: cfg.Logger, clock: clock.Or(cfg.Clock)}
	if d.logger == nil {
		d.logger = slog.Default()
	}
	if cfg.AttemptTimeout > 0 {
		mw := attempt.Middleware(d.clock, cfg.AttemptTimeout)
		d.opts = []func(*dynamodb.Options){func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, mw) }}
	}
	return d, nil
}

// Attribute names. The key is the recovery log table's.
const (
	attrLog     = "log"
	attrSeq     = "seq"
	attrData    = "data"         // chunk items
	attrFenceC  = "fenceCounter" // head: the fence
	attrFenceO  = "fenceOwner"
	attrGen     = "generation" // head: the current snapshot
	attrChunks  = "chunks"
	attrSize    = "size"
	attrSum     = "sha256"
	attrShape   = "shape"
	attrCounter = "counter" // lease of the snapshot's writer
	attrOwner   = "owner"
	attrPos     = "position" // Position.order(), compared by the condition
	attrSeqNum  = "sequence"
	attrSubSeq  = "subSequence"
	attrPending = "pending" // head: the generation a Put is writing
	attrPendN   = "pendingChunks"
)

// maxPartition is DynamoDB's limit on a partition key value (2048 bytes),
// with room for a generation's suffix.
const maxPartition = 2000

// head returns the partition of key's head item.
func head(key Key) (string, error) {
	p := "shardstate/" + url.PathEscape(key.Application) + "/" + url.PathEscape(key.Stream) + "/" + url.PathEscape(key.Shard)
	if len(p) > maxPartition {
		return "", fmt.Errorf("%w: shard %s: %d bytes escaped, more than %d", ErrInvalid, key, len(p), maxPartition)
	}
	return p, nil
}

func itemKey(partition string, seq int) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrLog: str(partition), attrSeq: num(int64(seq))}
}

// chunkKey returns the key of chunk i (from 1) of generation gen: a
// partition of its own, so that a generation's reads and writes spread over
// DynamoDB's partitions (each serves at most 3000 read and 1000 write units
// a second) rather than queue on one.
func chunkKey(gen string, i int) map[string]types.AttributeValue {
	return itemKey(gen+"/"+strconv.Itoa(i), i)
}

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// putCond is the fencing rule (see Store) as a condition on the head item,
// with :c, :o and :p the writer's lease and position order.
const putCond = "#fc < :c OR (#fc = :c AND #fo = :o AND (attribute_not_exists(#gen) OR #sc < :c OR #pos <= :p))"

// Put implements Store; see Dynamo for the steps. A call DynamoDB denies
// for want of an IAM permission fails it naming the action to allow.
func (d *Dynamo) Put(ctx context.Context, key Key, snap Snapshot) error {
	return accessFix(d.put(ctx, key, snap), d.table)
}

func (d *Dynamo) put(ctx context.Context, key Key, snap Snapshot) error {
	if err := check(key, snap); err != nil {
		return err
	}
	hp, err := head(key)
	if err != nil {
		return err
	}
	chunks := dynamochunk.Split(snap.Data)
	var id [8]byte
	rand.Read(id[:])
	gen := hp + "#" + strconv.FormatInt(snap.Lease.Counter, 10) + "-" + hex.EncodeToString(id[:])
	names := map[string]string{"#seq": attrSeq, "#fc": attrFenceC, "#fo": attrFenceO, "#gen": attrGen, "#sc": attrCounter, "#pos": attrPos}
	values := map[string]types.AttributeValue{":c": num(snap.Lease.Counter), ":o": str(snap.Lease.Owner), ":p": str(snap.Position.order())}

	// 1. Raise the fence, and note the generation as pending.
	pvalues := map[string]types.AttributeValue{":g": str(gen), ":n": num(int64(len(chunks)))}
	for k, v := range values {
		pvalues[k] = v
	}
	pnames := map[string]string{"#pe": attrPending, "#pn": attrPendN}
	for k, v := range names {
		pnames[k] = v
	}
	out, err := d.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(d.table),
		Key:                       itemKey(hp, 0),
		UpdateExpression:          aws.String("SET #fc = :c, #fo = :o, #pe = :g, #pn = :n"),
		ConditionExpression:       aws.String("attribute_not_exists(#seq) OR " + putCond),
		ExpressionAttributeNames:  pnames,
		ExpressionAttributeValues: pvalues,
		ReturnValues:              types.ReturnValueAllOld,
	}, d.opts...)
	if err != nil {
		return d.refused(ctx, key, hp, snap.Lease, "put: claim", err)
	}
	old := out.Attributes

	// 2. Write the chunks.
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(d.limit)
	for i, c := range chunks {
		if gctx.Err() != nil {
			break // a write failed: start no more
		}
		g.Go(func() error {
			it := chunkKey(gen, i+1)
			it[attrData] = &types.AttributeValueMemberB{Value: c}
			if _, err := d.client.PutItem(gctx, &dynamodb.PutItemInput{TableName: aws.String(d.table), Item: it}, d.opts...); err != nil {
				return fmt.Errorf("shardstate: put shard %s: chunk %d of %d: %w", key, i+1, len(chunks), err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err // the pending generation is deleted by the next Put
	}

	// 3. Switch the head to the generation.
	sum := sha256.Sum256(snap.Data)
	item := itemKey(hp, 0)
	for k, v := range map[string]types.AttributeValue{
		attrFenceC: num(snap.Lease.Counter), attrFenceO: str(snap.Lease.Owner),
		attrGen: str(gen), attrChunks: num(int64(len(chunks))), attrSize: num(int64(len(snap.Data))),
		attrSum: &types.AttributeValueMemberB{Value: sum[:]}, attrShape: str(key.Shape),
		attrCounter: num(snap.Lease.Counter), attrOwner: str(snap.Lease.Owner), attrPos: str(snap.Position.order()),
		attrSeqNum: str(snap.Position.Sequence), attrSubSeq: num(snap.Position.SubSequence),
	} {
		item[k] = v
	}
	if _, err := d.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                 aws.String(d.table),
		Item:                      item,
		ConditionExpression:       aws.String(putCond),
		ExpressionAttributeNames:  map[string]string{"#fc": attrFenceC, "#fo": attrFenceO, "#gen": attrGen, "#sc": attrCounter, "#pos": attrPos},
		ExpressionAttributeValues: values,
	}, d.opts...); err != nil {
		err = d.refused(ctx, key, hp, snap.Lease, "put: switch", err)
		if errors.Is(err, ErrFenced) {
			// Unless the switch was applied after all: an attempt whose
			// answer was lost, retried by the SDK after a successor's
			// claim, fails its condition though the head names gen.
			if h, herr := d.getHead(ctx, hp); herr == nil && sAttr(h, attrGen) != gen {
				d.deleteGen(ctx, key, gen, int64(len(chunks)))
			}
		}
		return err
	}

	// 4. Delete the generation replaced, and one a crashed Put left.
	// Never gen itself: a retried step 1, whose first attempt was applied,
	// returns gen as the pending generation.
	oldGen, oldN := sAttr(old, attrGen), nAttr(old, attrChunks)
	if oldGen != "" && oldGen != gen {
		d.deleteGen(ctx, key, oldGen, oldN)
	}
	if p := sAttr(old, attrPending); p != "" && p != oldGen && p != gen {
		d.deleteGen(ctx, key, p, nAttr(old, attrPendN))
	}
	return nil
}

// deleteGen deletes the n chunks of generation gen, logging a failure: an
// old generation left behind wastes space but is never read. A failure
// because ctx was cancelled (the worker stops at once) is expected, so it
// is logged at INFO; any other at WARN.
func (d *Dynamo) deleteGen(ctx context.Context, key Key, gen string, n int64) {
	keys := make([]map[string]types.AttributeValue, n)
	for i := range keys {
		keys[i] = chunkKey(gen, i+1)
	}
	if err := dynamochunk.DeleteKeys(ctx, timedWriter{d}, d.clock, d.table, keys); err != nil {
		level := slog.LevelWarn
		if errors.Is(ctx.Err(), context.Canceled) {
			level = slog.LevelInfo
		}
		d.logger.Log(context.WithoutCancel(ctx), level, "shardstate: could not delete an old snapshot generation; it stays in the table, unread",
			"table", d.table, "shard", key.String(), "generation", gen, "chunks", n, "err", accessFix(err, d.table))
	}
}

// timedWriter is the store's BatchWriteItem with its per-call options.
type timedWriter struct{ d *Dynamo }

func (w timedWriter) BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	return w.d.client.BatchWriteItem(ctx, in, append(opts, w.d.opts...)...)
}

// refused turns a failed conditional write into ErrFenced, reading the head
// to say why; other errors are wrapped as they are.
func (d *Dynamo) refused(ctx context.Context, key Key, hp string, l Lease, what string, err error) error {
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return fmt.Errorf("shardstate: %s shard %s: %w", what, key, err)
	}
	h, herr := d.getHead(ctx, hp)
	if herr != nil {
		return fmt.Errorf("%w: shard %s: lease counter %d of %q refused (reading why: %w)", ErrFenced, key, l.Counter, l.Owner, herr)
	}
	return fencedError(key, l, headFence(h))
}

func (d *Dynamo) getHead(ctx context.Context, hp string) (map[string]types.AttributeValue, error) {
	out, err := d.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(d.table), Key: itemKey(hp, 0), ConsistentRead: aws.Bool(true)}, d.opts...)
	if err != nil {
		return nil, err
	}
	return out.Item, nil
}

func headFence(h map[string]types.AttributeValue) fence {
	return fence{
		claimed:  len(h) > 0,
		lease:    Lease{Counter: nAttr(h, attrFenceC), Owner: sAttr(h, attrFenceO)},
		snapshot: Lease{Counter: nAttr(h, attrCounter), Owner: sAttr(h, attrOwner)},
		has:      sAttr(h, attrGen) != "",
		order:    sAttr(h, attrPos),
	}
}

func sAttr(it map[string]types.AttributeValue, name string) string {
	if v, ok := it[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func nAttr(it map[string]types.AttributeValue, name string) int64 {
	if v, ok := it[name].(*types.AttributeValueMemberN); ok {
		n, _ := strconv.ParseInt(v.Value, 10, 64)
		return n
	}
	return 0
}

// Claim implements Store. A call DynamoDB denies for want of an IAM
// permission fails it naming the action to allow.
func (d *Dynamo) Claim(ctx context.Context, key Key, lease Lease) error {
	return accessFix(d.claim(ctx, key, lease), d.table)
}

func (d *Dynamo) claim(ctx context.Context, key Key, lease Lease) error {
	if err := key.validate(); err != nil {
		return err
	}
	if err := lease.validate(); err != nil {
		return fmt.Errorf("%w: shard %s: %w", ErrInvalid, key, err)
	}
	hp, err := head(key)
	if err != nil {
		return err
	}
	_, err = d.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(d.table),
		Key:                       itemKey(hp, 0),
		UpdateExpression:          aws.String("SET #fc = :c, #fo = :o"),
		ConditionExpression:       aws.String("attribute_not_exists(#seq) OR #fc < :c OR (#fc = :c AND #fo = :o)"),
		ExpressionAttributeNames:  map[string]string{"#seq": attrSeq, "#fc": attrFenceC, "#fo": attrFenceO},
		ExpressionAttributeValues: map[string]types.AttributeValue{":c": num(lease.Counter), ":o": str(lease.Owner)},
	}, d.opts...)
	if err != nil {
		return d.refused(ctx, key, hp, lease, "claim", err)
	}
	return nil
}

// getAttempts bounds how many generations one Get tries: each retry follows
// a Put that switched the head while the previous one was read.
const getAttempts = 5

// Get implements Store. A call DynamoDB denies for want of an IAM
// permission fails it naming the action to allow.
func (d *Dynamo) Get(ctx context.Context, key Key) (Snapshot, error) {
	snap, err := d.get(ctx, key)
	return snap, accessFix(err, d.table)
}

func (d *Dynamo) get(ctx context.Context, key Key) (Snapshot, error) {
	if err := key.validate(); err != nil {
		return Snapshot{}, err
	}
	hp, err := head(key)
	if err != nil {
		return Snapshot{}, err
	}
	h, err := d.getHead(ctx, hp)
	if err != nil {
		return Snapshot{}, fmt.Errorf("shardstate: get shard %s: %w", key, err)
	}
	for range getAttempts {
		gen := sAttr(h, attrGen)
		switch {
		case gen == "":
			return Snapshot{}, fmt.Errorf("%w: shard %s", ErrNoSnapshot, key)
		case sAttr(h, attrShape) != key.Shape:
			return Snapshot{}, shapeError(key, sAttr(h, attrShape))
		}
		items, missing, err := d.readGen(ctx, gen, nAttr(h, attrChunks))
		if err != nil {
			return Snapshot{}, fmt.Errorf("shardstate: get shard %s: %w", key, err)
		}
		if missing == 0 {
			return d.assemble(key, h, items)
		}
		// The generation was deleted while read: a Put replaced it.
		if h, err = d.getHead(ctx, hp); err != nil {
			return Snapshot{}, fmt.Errorf("shardstate: get shard %s: %w", key, err)
		}
		if sAttr(h, attrGen) == gen {
			return Snapshot{}, fmt.Errorf("%w: shard %s: chunk %d of generation %s is missing", ErrCorrupt, key, missing, gen)
		}
	}
	return Snapshot{}, fmt.Errorf("shardstate: get shard %s: replaced by %d Puts while read; try again", key, getAttempts)
}

// readGen reads the n chunks of generation gen, in parallel; missing is the
// number of a chunk not found, or 0.
func (d *Dynamo) readGen(ctx context.Context, gen string, n int64) (items []map[string]types.AttributeValue, missing int, err error) {
	items = make([]map[string]types.AttributeValue, n)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(d.limit)
	for i := range items {
		if gctx.Err() != nil {
			break // a read failed: start no more
		}
		g.Go(func() error {
			out, err := d.client.GetItem(gctx, &dynamodb.GetItemInput{TableName: aws.String(d.table), Key: chunkKey(gen, i+1), ConsistentRead: aws.Bool(true)}, d.opts...)
			if err != nil {
				return fmt.Errorf("chunk %d of %d: %w", i+1, n, err)
			}
			items[i] = out.Item
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, 0, err
	}
	for i, it := range items {
		if len(it) == 0 {
			return nil, i + 1, nil
		}
	}
	return items, 0, nil
}

// assemble joins the chunks and checks them against the head.
func (d *Dynamo) assemble(key Key, h map[string]types.AttributeValue, items []map[string]types.AttributeValue) (Snapshot, error) {
	data, bad, err := dynamochunk.Join(items, attrSeq, attrData)
	if err != nil {
		return Snapshot{}, fmt.Errorf("%w: shard %s: chunk %d: %w", ErrCorrupt, key, bad, err)
	}
	sum := sha256.Sum256(data)
	stored, _ := h[attrSum].(*types.AttributeValueMemberB)
	if int64(len(data)) != nAttr(h, attrSize) || stored == nil || !bytes.Equal(stored.Value, sum[:]) {
		return Snapshot{}, fmt.Errorf("%w: shard %s: %d bytes read, the head says %d; or their SHA-256 differs",
			ErrCorrupt, key, len(data), nAttr(h, attrSize))
	}
	return Snapshot{
		Data:     data,
		Position: Position{Sequence: sAttr(h, attrSeqNum), SubSequence: nAttr(h, attrSubSeq)},
		Lease:    Lease{Counter: nAttr(h, attrCounter), Owner: sAttr(h, attrOwner)},
	}, nil
}
