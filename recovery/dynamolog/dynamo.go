package dynamolog

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/awsconf"
	"github.com/weirstream/weir/internal/dynamosafe"
	"github.com/weirstream/weir/internal/dynamotable"
	"github.com/weirstream/weir/recovery"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// MaxEntrySize is the largest record (an encoded entry) a DynamoDB log
// stores: an item holds at most 400 KB, and the rest of the item (key,
// writer) needs room. Append refuses a larger record with
// recovery.ErrEntryTooLarge rather than splitting it, which would make
// entries non-atomic: a block would need thousands of sequence ranges, or a
// batch thousands of blocks, to reach it.
const MaxEntrySize = 380 << 10

// maxDynamoName is the longest log name accepted (a partition key may hold
// 2048 bytes; the item size budget above assumes at most this).
const maxDynamoName = 1024

// Attribute names of the items of a DynamoDB log. The key is (log, seq): a
// log is one partition, its items ordered by seq, a number from 1. An item's
// type is one of the item* values.
const (
	attrLog    = "log"
	attrSeq    = "seq"
	attrType   = "type"
	attrEntry  = "entry"  // entry items: the entry's encoding (JSON)
	attrWriter = "writer" // the writer that put the item
	attrBase   = "base"   // base items: the seq of the first item in effect
)

const (
	// itemEntry holds one entry.
	itemEntry = "entry"
	// itemClaim marks the opening of the log by a writer: taking the next
	// seq fences off any earlier writer, whose next put would need it.
	itemClaim = "claim"
	// itemBase ends a compaction: items before its base seq are
	// superseded by the copies from base on.
	itemBase = "base"
)

// Client is the part of *dynamodb.Client a DynamoDB log uses.
type Client interface {
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error)
}

// Config configures a log kept in a DynamoDB table, so that a worker
// restarted on any machine, with the same Name, recovers exactly what its
// predecessor logged. It is a recovery.Opener. No other worker reads it: a
// worker taking over another's shards reads them after their checkpoint,
// which counts only completed records.
//
// The table's key is log (string, partition) and seq (number, sort); it may
// hold the logs of many applications and workers, one partition each. It is
// created, on demand (PAY_PER_REQUEST), if it does not exist. Each record
// is one item, written with a single-item conditional put.
//
// Opening the log claims it: a writer that opened it before is fenced
// off, its next Append failing with recovery.ErrFenced, so a zombie worker cannot
// append after its successor has read the log. Read returns the log as read
// at Open plus this writer's appends. Replace writes the new records as new
// items, then a base item marking the items before them superseded, then
// deletes those; a crash at any point leaves the old records, or the new,
// or the old followed by a prefix of the new.
//
// A put that gets no definite answer (DynamoDB unreachable, server errors)
// is tried again until DynamoDB answers, the call waiting meanwhile (see
// putNext): an outage delays appends and never ends the writer. A put
// refused for good (the table deleted, access denied), or cut short by its
// ctx, leaves its outcome unknown: every later call returns that error, and
// the log must be opened again. The log is safe for concurrent use; it
// serialises appends, and a state snapshot being stored (PutSnapshot, one
// put per chunk) holds none of them back.
type Config struct {
	// Client is the DynamoDB client, usually a *dynamodb.Client; a client
	// given here is used as it is, so AWS and Endpoint, which it would
	// ignore, must then be left unset. Default: a client built from AWS
	// and Endpoint, as the lease table's (package leasetable).
	Client Client
	// AWS is the AWS configuration of the default client. Default: the
	// SDK's default configuration (environment, shared files, instance
	// role).
	AWS *aws.Config
	// Endpoint overrides the DynamoDB endpoint URL of the default client,
	// for example "http://127.0.0.1:4568" for a local server.
	Endpoint string
	// Table is the table's name: 3 to 255 of a-z A-Z 0-9 _ . - (DynamoDB's
	// rule, checked by Open before any call). Required.
	Table string
	// Name is the log's name, its partition key: unique per application
	// and writer, for example "wordcount/worker-1". At most 1024 bytes.
	// Required.
	Name string
	// Logger receives warnings, such as superseded items a compaction could
	// not delete, or a write DynamoDB did not answer and that is being
	// retried. Default slog.Default().
	Logger *slog.Logger
	// Clock times the waits between retries and the attempt timeout.
	// Default clock.Real{}.
	Clock clock.Clock
	// AttemptTimeout bounds each attempt of every DynamoDB call: an
	// attempt with no answer by then is abandoned and retried by the
	// client's retryer (the default client's retries it like any transient
	// error), so a silent connection holds a block push for at most this
	// long per attempt. It takes effect through the per-call options of the
	// client's methods, as *dynamodb.Client applies them. Default
	// DefaultAttemptTimeout (5s); negative means none.
	AttemptTimeout time.Duration
}

// Open opens the log c names, creating the table if it does not exist,
// and claims it (see Config). The Log is also a recovery.SnapshotStore.
// Checking the table (DescribeTable, and CreateTable), reading the log and
// claiming it are tried again until DynamoDB answers, as puts are (and so
// is reading a snapshot); a call DynamoDB refuses for good fails Open,
// naming the table and the fix. An item that does not decode is a
// *recovery.CorruptError with Path "dynamodb:<table>/<name>" and Offset its
// seq. A record is stored as it is, and decoded by the driver.
func (c Config) Open(ctx context.Context) (recovery.Log, error) {
	l, err := open(ctx, c)
	if err != nil {
		return nil, err
	}
	return l, nil
}

func (c Config) validate() error {
	var problems []error
	if err := awsconf.CheckEndpoint("Endpoint", c.Endpoint); err != nil {
		problems = append(problems, err)
	}
	if err := awsconf.CheckClient("Client", c.Client != nil, c.AWS != nil, c.Endpoint); err != nil {
		problems = append(problems, err)
	}
	if c.Table == "" {
		problems = append(problems, errors.New("Table empty: set the name of the table holding recovery logs"))
	} else if err := dynamotable.CheckName(c.Table); err != nil {
		problems = append(problems, fmt.Errorf("Table: %w", err))
	}
	switch {
	case c.Name == "":
		problems = append(problems, errors.New("Name empty: set the log's name, unique per application and worker"))
	case len(c.Name) > maxDynamoName || !utf8.ValidString(c.Name):
		problems = append(problems, fmt.Errorf("Name %.40q...: must be valid UTF-8 of at most %d bytes", c.Name, maxDynamoName))
	}
	if c.AttemptTimeout > 0 && c.AttemptTimeout < time.Millisecond {
		// Seconds meant and nanoseconds written: no attempt could finish.
		problems = append(problems, fmt.Errorf("AttemptTimeout %v: must be at least 1ms (0 means %v, negative none); write a duration in seconds as n * time.Second",
			c.AttemptTimeout, DefaultAttemptTimeout))
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %w", recovery.ErrInvalidConfig, errors.Join(problems...))
	}
	return nil
}

// dynamoLog is the recovery.Log and recovery.SnapshotStore a Config opens.
type dynamoLog struct {
	client   Client
	table    string
	endpoint string // the client's endpoint, for the logs
	name     string
	writer   string
	logger   *slog.Logger
	clock    clock.Clock

	// snapMu is held by PutSnapshot and PruneSnapshots, before mu; mu
	// guards what follows, and PutSnapshot does not hold it during its
	// puts.
	snapMu   sync.Mutex
	mu       sync.Mutex
	next     int64    // seq of the next item
	payloads [][]byte // encoded entries in effect, in order
	seqs     []int64  // seqs of the payloads' items
	base     int64    // seq of the base item in effect, or 0
	claims   []int64  // seqs of claim items
	stale    []int64  // seqs of items superseded by a compaction, to delete
	snaps    []string // snapshots put or referenced by replaced records, not yet pruned (PruneSnapshots)
	failed   error    // sticky: fenced, or a put of unknown outcome
	closed   bool
}

// open opens the log cfg names; see Config.Open.
func open(ctx context.Context, cfg Config) (*dynamoLog, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	client := cfg.Client
	if client == nil {
		c, err := awsconf.DynamoDB(ctx, cfg.AWS, cfg.Endpoint, "the recovery log (set Client or AWS to avoid it)")
		if err != nil {
			return nil, fmt.Errorf("dynamolog: %w", err)
		}
		client = c
	}
	// Read before the client is wrapped, which hides its options.
	endpoint := awsconf.DynamoDBEndpoint(ctx, client)
	client = dynamosafe.Wrap(client) // a panic in it fails the call, not the process
	if cfg.AttemptTimeout >= 0 {
		client = withAttemptTimeout(client, clock.Or(cfg.Clock), cmp.Or(cfg.AttemptTimeout, DefaultAttemptTimeout))
	}
	var id [8]byte
	rand.Read(id[:])
	l := &dynamoLog{client: client, table: cfg.Table, endpoint: endpoint, name: cfg.Name, writer: hex.EncodeToString(id[:]),
		logger: cfg.Logger, clock: clock.Or(cfg.Clock)}
	if l.logger == nil {
		l.logger = slog.Default()
	}
	if err := l.ensureTable(ctx); err != nil {
		return nil, err
	}
	// Another writer may put items between our read and our claim; then
	// the claim's seq is taken, and we read again.
	const attempts = 10
	for range attempts {
		if err := l.load(ctx); err != nil {
			return nil, err
		}
		seq, attrs := l.next, map[string]types.AttributeValue{attrType: str(itemClaim)}
		var mine bool
		err := l.untilAnswered(ctx, seq, func() (err error) {
			mine, err = l.putOrCheck(ctx, seq, attrs)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("dynamolog: claim log %s: %w", l.where(), err)
		}
		if mine {
			l.claims = append(l.claims, seq)
			l.next++
			return l, nil
		}
	}
	return nil, fmt.Errorf("dynamolog: claim log %s: %d attempts lost to other writers opening it at the same time: "+
		"most likely another worker given the same Name; fix: give each worker a Name of its own", l.where(), attempts)
}

func (l *dynamoLog) where() string { return "dynamodb:" + l.table + "/" + l.name }

// load reads every item of the log, in seq order, and keeps the entries in
// effect: those from the last base item's base seq on.
func (l *dynamoLog) load(ctx context.Context) error {
	var items []logItem
	var base int64
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(l.table),
		KeyConditionExpression:    aws.String("#l = :l"),
		ExpressionAttributeNames:  map[string]string{"#l": attrLog},
		ExpressionAttributeValues: map[string]types.AttributeValue{":l": str(l.name)},
		ConsistentRead:            aws.Bool(true),
	}
	for {
		var out *dynamodb.QueryOutput
		err := l.untilAnswered(ctx, "query", func() (err error) {
			out, err = l.client.Query(ctx, in)
			return err
		})
		if err != nil {
			return fmt.Errorf("dynamolog: read log %s: %w", l.where(), err)
		}
		for _, it := range out.Items {
			li, err := readItem(it)
			if err != nil {
				return &recovery.CorruptError{Path: l.where(), Offset: li.seq, Err: err}
			}
			if li.typ == itemBase {
				base = li.base
			}
			items = append(items, li)
		}
		if len(out.LastEvaluatedKey) == 0 {
			break
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	l.payloads, l.seqs, l.claims, l.stale, l.base, l.next = nil, nil, nil, nil, 0, 1
	for _, it := range items {
		switch {
		case it.typ == itemClaim:
			l.claims = append(l.claims, it.seq)
		case it.seq < base:
			l.stale = append(l.stale, it.seq)
		case it.typ == itemEntry:
			l.payloads, l.seqs = append(l.payloads, it.payload), append(l.seqs, it.seq)
		default:
			l.base = it.seq
		}
		l.next = it.seq + 1
	}
	return nil
}

// logItem is an item of a DynamoDB log.
type logItem struct {
	seq     int64
	typ     string // itemEntry, itemClaim or itemBase
	payload []byte // itemEntry: the entry's encoding, which decodes
	base    int64  // itemBase: the seq of the first item in effect
}

// readItem parses an item; on error, the seq is set if the item has one.
func readItem(it map[string]types.AttributeValue) (logItem, error) {
	var li logItem
	var err error
	if li.seq, err = numAttr(it, attrSeq); err != nil {
		return li, err
	}
	t, ok := it[attrType].(*types.AttributeValueMemberS)
	if !ok {
		return li, fmt.Errorf("item has no string %q attribute", attrType)
	}
	li.typ = t.Value
	switch li.typ {
	case itemClaim:
	case itemBase:
		li.base, err = numAttr(it, attrBase)
	case itemEntry:
		e, ok := it[attrEntry].(*types.AttributeValueMemberS)
		if !ok {
			return li, fmt.Errorf("entry item has no string %q attribute", attrEntry)
		}
		li.payload = []byte(e.Value)
	default:
		err = fmt.Errorf("unknown item type %q", li.typ)
	}
	return li, err
}

func numAttr(it map[string]types.AttributeValue, name string) (int64, error) {
	n, ok := it[name].(*types.AttributeValueMemberN)
	if !ok {
		return 0, fmt.Errorf("item has no number %q attribute", name)
	}
	v, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("attribute %q: %w", name, err)
	}
	return v, nil
}

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// put puts an item at l.next, on condition that no item is there yet.
func (l *dynamoLog) put(ctx context.Context, attrs map[string]types.AttributeValue) error {
	attrs[attrLog], attrs[attrSeq], attrs[attrWriter] = str(l.name), num(l.next), str(l.writer)
	_, err := l.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                aws.String(l.table),
		Item:                     attrs,
		ConditionExpression:      aws.String("attribute_not_exists(#s)"),
		ExpressionAttributeNames: map[string]string{"#s": attrSeq},
	})
	return err
}
