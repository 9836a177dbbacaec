package leasetable

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/checkpoint"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/backoff"
)

// Attribute names of a lease item, as the Kinesis Client Library writes them.
const (
	attrKey           = "leaseKey"
	attrOwner         = "leaseOwner"
	attrCounter       = "leaseCounter"
	attrCheckpoint    = "checkpoint"
	attrSubSeq        = "checkpointSubSequenceNumber"
	attrOwnerSwitches = "ownerSwitchesSinceCheckpoint"
	attrParents       = "parentShardIds"
	// attrWeirCheckpoint is weir's own: every checkpoint weir writes also
	// goes here, so a reader can tell weir's checkpoints from a KCL
	// application's (which ignores and keeps unknown attributes).
	attrWeirCheckpoint = "weirCheckpoint"
)

// DefaultPollInterval is the longest wait between two checks of Ensure
// whether a new table is ACTIVE.
const DefaultPollInterval = time.Second

// firstPoll is the first wait of Ensure for a new table. The waits double
// from it, with jitter, up to the poll interval: a local server makes a
// table usable within milliseconds, so a worker's cold start does not wait
// a whole second for it, and DynamoDB's several seconds cost only a few
// more checks.
const firstPoll = 25 * time.Millisecond

// DynamoDBAPI is the part of *dynamodb.Client a Table uses. Tests may wrap a
// real client to hold or fail calls.
type DynamoDBAPI interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

// Lease is one shard's item in the lease table.
type Lease struct {
	// Shard is the shard ID (leaseKey, the hash key).
	Shard string
	// Owner is the worker holding the lease (leaseOwner), "" if none.
	Owner string
	// Counter is the lease's version (leaseCounter): every write adds one,
	// and every write is conditional on the value last seen.
	Counter int64
	// Checkpoint is a sequence number, or checkpoint.TrimHorizon, checkpoint.LatestPosition,
	// checkpoint.AtTimestamp or checkpoint.ShardEnd (checkpoint).
	Checkpoint string
	// SubSequence is the KPL sub-record within Checkpoint
	// (checkpointSubSequenceNumber); weir writes 0.
	SubSequence int64
	// WeirCheckpoint is the checkpoint weir last wrote (weirCheckpoint, an
	// attribute the KCL ignores and keeps), "" if weir never wrote one.
	// See WrittenByWeir.
	WeirCheckpoint string
	// OwnerSwitches counts owner changes since the last checkpoint
	// (ownerSwitchesSinceCheckpoint).
	OwnerSwitches int64
	// Parents are the shard's parent shard IDs (parentShardIds).
	Parents []string
}

// WrittenByWeir reports whether weir wrote the lease's checkpoint: it is
// the one weir last wrote (WeirCheckpoint) with sub-sequence 0. weir
// checkpoints whole Kinesis records, so every record up to and including
// such a checkpoint is processed. Otherwise a Kinesis Client Library
// application wrote it, whose checkpoint (seq, subSeq) means the user
// records up to that sub-record of seq are processed, not necessarily the
// rest of a KPL aggregate at seq.
func (l Lease) WrittenByWeir() bool {
	return l.Checkpoint != "" && l.Checkpoint == l.WeirCheckpoint && l.SubSequence == 0
}

// TableConfig configures a Table.
type TableConfig struct {
	// Name is the DynamoDB table name: 3 to 255 of [a-zA-Z0-9_.-]. Required.
	Name string
	// Client is the DynamoDB client, usually a *dynamodb.Client. Required.
	Client DynamoDBAPI
	// Clock times the waits of Ensure. Default clock.Real{}.
	Clock clock.Clock
	// PollInterval is the longest wait between two checks of Ensure that
	// a new table is ACTIVE: the waits start at 25ms and double, with
	// jitter, up to it. Default DefaultPollInterval (1s).
	PollInterval time.Duration
}

func (c TableConfig) problems() []error {
	var problems []error
	if err := validTableName(c.Name); err != nil {
		problems = append(problems, err)
	}
	if c.Client == nil {
		problems = append(problems, errors.New("DynamoDB client is nil: pass a *dynamodb.Client"))
	}
	if c.PollInterval < 0 {
		problems = append(problems, fmt.Errorf("PollInterval %v: must be >= 0 (0 means %v)", c.PollInterval, DefaultPollInterval))
	}
	return problems
}

// ValidateTableName reports why name cannot name a lease table (DynamoDB's
// rule: 3 to 255 of a-z A-Z 0-9 _ . -), or nil if it can.
func ValidateTableName(name string) error { return validTableName(name) }

func validTableName(name string) error {
	if len(name) < 3 || len(name) > 255 {
		return fmt.Errorf("table name %q: length %d, must be 3 to 255 characters", name, len(name))
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return fmt.Errorf("table name %q: byte %d (%q) not allowed, use only a-z A-Z 0-9 _ . -", name, i, c)
		}
	}
	return nil
}

// Table is the lease and checkpoint table. Every write is a single-item
// conditional write; a write whose condition fails returns an error wrapping
// checkpoint.ErrLeaseLost. A Table is safe for concurrent use; it keeps no state but its
// configuration.
type Table struct {
	name string
	db   DynamoDBAPI
	clk  clock.Clock
	poll time.Duration
	// pageLimit, when > 0, limits the items of one Scan page (tests).
	pageLimit int32
}

// NewTable validates cfg and returns a Table; it does no I/O (see Ensure).
func NewTable(cfg TableConfig) (*Table, error) {
	if p := cfg.problems(); len(p) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(p...))
	}
	return newTable(cfg), nil
}

func newTable(cfg TableConfig) *Table {
	return &Table{name: cfg.Name, db: cfg.Client, clk: clock.Or(cfg.Clock), poll: cmp.Or(cfg.PollInterval, DefaultPollInterval)}
}

// Name returns the table name.
func (t *Table) Name() string { return t.name }

// Ensure makes the table usable: it creates it (hash key leaseKey, on-demand
// billing) if it does not exist, waits until it is ACTIVE, and checks that its
// key is leaseKey.
func (t *Table) Ensure(ctx context.Context) error {
	created := false
	wait := backoff.Policy{Base: min(firstPoll, t.poll), Max: t.poll}.Start()
	for {
		out, err := t.db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &t.name})
		var notFound *types.ResourceNotFoundException
		status := "not found"
		switch {
		case errors.As(err, &notFound) && !created:
			if err := t.create(ctx); err != nil {
				return err
			}
			created = true
			continue
		case errors.As(err, &notFound):
			// Created (by us or another worker) but not visible yet: wait,
			// rather than create again at once, which would spin.
		case err != nil:
			return fmt.Errorf("leasetable: describe table %s: %w", t.name, err)
		case out.Table.TableStatus == types.TableStatusActive:
			return checkKeySchema(t.name, out.Table.KeySchema)
		default:
			status = string(out.Table.TableStatus)
		}
		if err := wait.Wait(ctx, t.clk); err != nil {
			return fmt.Errorf("leasetable: waiting for table %s (status %s) to be ACTIVE: %w", t.name, status, err)
		}
	}
}

func (t *Table) create(ctx context.Context) error {
	_, err := t.db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            &t.name,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(attrKey), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(attrKey), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) { // in use: another worker created it first
		return fmt.Errorf("leasetable: create table %s: %w", t.name, err)
	}
	return nil
}

func checkKeySchema(name string, ks []types.KeySchemaElement) error {
	if len(ks) != 1 || aws.ToString(ks[0].AttributeName) != attrKey || ks[0].KeyType != types.KeyTypeHash {
		return fmt.Errorf("leasetable: table %s: key schema %v is not a lease table's (hash key %s only)", name, keyNames(ks), attrKey)
	}
	return nil
}

func keyNames(ks []types.KeySchemaElement) []string {
	var names []string
	for _, k := range ks {
		names = append(names, aws.ToString(k.AttributeName)+" "+string(k.KeyType))
	}
	return names
}

// List returns every lease, read consistently, in no particular order.
func (t *Table) List(ctx context.Context) ([]Lease, error) {
	var leases []Lease
	in := &dynamodb.ScanInput{TableName: &t.name, ConsistentRead: aws.Bool(true)}
	for {
		if t.pageLimit > 0 {
			in.Limit = &t.pageLimit
		}
		out, err := t.db.Scan(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("leasetable: scan %s: %w", t.name, err)
		}
		for _, item := range out.Items {
			l, err := decodeLease(item)
			if err != nil {
				return nil, fmt.Errorf("leasetable: scan %s: %w", t.name, err)
			}
			leases = append(leases, l)
		}
		if len(out.LastEvaluatedKey) == 0 {
			return leases, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// Get returns shard's lease, read consistently, and false if it has none.
func (t *Table) Get(ctx context.Context, shard string) (Lease, bool, error) {
	out, err := t.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &t.name, Key: keyOf(shard), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return Lease{}, false, fmt.Errorf("leasetable: get shard %s: %w", shard, err)
	}
	if out.Item == nil {
		return Lease{}, false, nil
	}
	l, err := decodeLease(out.Item)
	if err != nil {
		return Lease{}, false, fmt.Errorf("leasetable: get shard %s: %w", shard, err)
	}
	return l, true, nil
}

// Create writes l as a new lease unless the shard already has one; it reports
// whether it wrote. l.Counter and l.OwnerSwitches are written as given
// (normally 0), and l.Checkpoint defaults to checkpoint.TrimHorizon.
func (t *Table) Create(ctx context.Context, l Lease) (bool, error) {
	if l.Checkpoint == "" {
		l.Checkpoint = checkpoint.TrimHorizon
	}
	_, err := t.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:           &t.name,
		Item:                encodeLease(l),
		ConditionExpression: aws.String("attribute_not_exists(" + attrKey + ")"),
	})
	var failed *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &failed):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("leasetable: create lease %s: %w", l.Shard, err)
	}
	return true, nil
}

// Renew extends l, held by l.Owner: it adds one to the counter if the owner
// and counter are still those of l, and returns the lease as written. It
// returns an error wrapping checkpoint.ErrLeaseLost if they are not.
func (t *Table) Renew(ctx context.Context, l Lease) (Lease, error) {
	if l.Owner == "" {
		return Lease{}, fmt.Errorf("leasetable: renew shard %s: lease has no owner", l.Shard)
	}
	return t.update(ctx, "renew", l, "", nil)
}

// Take makes owner the holder of l (expired, unowned, or stolen), if its owner
// and counter are still those of l: it sets the owner, adds one to the
// counter and, if it had another owner, to ownerSwitchesSinceCheckpoint. It
// returns the lease as written, or an error wrapping checkpoint.ErrLeaseLost if another
// worker wrote the lease since l was read.
func (t *Table) Take(ctx context.Context, l Lease, owner string) (Lease, error) {
	if owner == "" {
		return Lease{}, fmt.Errorf("leasetable: take shard %s: empty owner", l.Shard)
	}
	set := ", #owner = :newowner"
	values := map[string]types.AttributeValue{":newowner": str(owner)}
	if l.Owner != "" && owner != l.Owner { // as KCL: taking an unowned lease is no switch
		set += ", #switches = if_not_exists(#switches, :zero) + :one"
		values[":zero"] = num(0)
	}
	return t.update(ctx, "take", l, set, values)
}

// Release hands l back: it removes the owner and adds one to the counter if
// the owner and counter are still those of l (else checkpoint.ErrLeaseLost). Any worker
// may then take it.
func (t *Table) Release(ctx context.Context, l Lease) (Lease, error) {
	if l.Owner == "" {
		return Lease{}, fmt.Errorf("leasetable: release shard %s: lease has no owner", l.Shard)
	}
	return t.update(ctx, "release", l, " REMOVE #owner", nil)
}

// Checkpoint stores checkpoint (a sequence number, or checkpoint.ShardEnd, checkpoint.TrimHorizon,
// checkpoint.LatestPosition, checkpoint.AtTimestamp) and subSeq in l, and checkpoint again in
// weirCheckpoint (see Lease.WrittenByWeir), resets
// ownerSwitchesSinceCheckpoint and adds one to the counter, if the owner and
// counter are still those of l. Otherwise it returns an error wrapping
// checkpoint.ErrLeaseLost and writes nothing: a worker that lost a lease can never
// checkpoint it again.
func (t *Table) Checkpoint(ctx context.Context, l Lease, seq string, subSeq int64) (Lease, error) {
	if l.Owner == "" {
		return Lease{}, fmt.Errorf("leasetable: checkpoint shard %s: lease has no owner", l.Shard)
	}
	if !validCheckpoint(seq) {
		return Lease{}, fmt.Errorf("leasetable: checkpoint shard %s: %q is neither a sequence number nor %s, %s, %s or %s",
			l.Shard, seq, checkpoint.TrimHorizon, checkpoint.LatestPosition, checkpoint.AtTimestamp, checkpoint.ShardEnd)
	}
	set := ", #ckpt = :ckpt, #weirckpt = :ckpt, #subseq = :subseq, #switches = :zero"
	values := map[string]types.AttributeValue{":ckpt": str(seq), ":subseq": num(subSeq), ":zero": num(0)}
	return t.update(ctx, "checkpoint", l, set, values)
}

func validCheckpoint(s string) bool {
	switch s {
	case checkpoint.TrimHorizon, checkpoint.LatestPosition, checkpoint.AtTimestamp, checkpoint.ShardEnd:
		return true
	}
	return batch.ValidateSeq(s) == nil
}

// update runs one conditional UpdateItem on l: it always adds one to the
// counter, adds extra (which begins with ", " for more SET clauses or " " for
// a REMOVE clause), and is conditional on l's owner and counter.
func (t *Table) update(ctx context.Context, op string, l Lease, extra string, values map[string]types.AttributeValue) (Lease, error) {
	if values == nil {
		values = make(map[string]types.AttributeValue)
	}
	values[":one"] = num(1)
	values[":counter"] = num(l.Counter)
	cond := "#counter = :counter AND attribute_not_exists(#owner)"
	if l.Owner != "" {
		cond = "#counter = :counter AND #owner = :owner"
		values[":owner"] = str(l.Owner)
	}
	expr := "SET #counter = #counter + :one" + extra
	out, err := t.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &t.name,
		Key:                       keyOf(l.Shard),
		UpdateExpression:          &expr,
		ConditionExpression:       &cond,
		ExpressionAttributeNames:  namesIn(expr + " " + cond),
		ExpressionAttributeValues: values,
		ReturnValues:              types.ReturnValueAllNew,
	})
	var failed *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &failed):
		return Lease{}, fmt.Errorf("leasetable: %s shard %s (owner %q, counter %d): %w", op, l.Shard, l.Owner, l.Counter, checkpoint.ErrLeaseLost)
	case err != nil:
		return Lease{}, fmt.Errorf("leasetable: %s shard %s: %w", op, l.Shard, err)
	}
	nl, err := decodeLease(out.Attributes)
	if err != nil {
		return Lease{}, fmt.Errorf("leasetable: %s shard %s: %w", op, l.Shard, err)
	}
	return nl, nil
}

// aliasAttr returns the attribute name of an expression alias update uses.
func aliasAttr(alias string) (string, bool) {
	switch alias {
	case "#owner":
		return attrOwner, true
	case "#counter":
		return attrCounter, true
	case "#ckpt":
		return attrCheckpoint, true
	case "#weirckpt":
		return attrWeirCheckpoint, true
	case "#subseq":
		return attrSubSeq, true
	case "#switches":
		return attrOwnerSwitches, true
	}
	return "", false
}

// namesIn returns the ExpressionAttributeNames of the aliases used in expr:
// DynamoDB rejects unused ones.
func namesIn(expr string) map[string]string {
	names := make(map[string]string)
	for i := 0; i < len(expr); i++ {
		if expr[i] != '#' {
			continue
		}
		j := i + 1
		for j < len(expr) && expr[j] >= 'a' && expr[j] <= 'z' {
			j++
		}
		if attr, ok := aliasAttr(expr[i:j]); ok {
			names[expr[i:j]] = attr
		}
		i = j - 1
	}
	return names
}

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func keyOf(shard string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrKey: str(shard)}
}

func encodeLease(l Lease) map[string]types.AttributeValue {
	item := map[string]types.AttributeValue{
		attrKey:           str(l.Shard),
		attrCounter:       num(l.Counter),
		attrCheckpoint:    str(l.Checkpoint),
		attrSubSeq:        num(l.SubSequence),
		attrOwnerSwitches: num(l.OwnerSwitches),
	}
	if l.Owner != "" {
		item[attrOwner] = str(l.Owner)
	}
	if l.WeirCheckpoint != "" {
		item[attrWeirCheckpoint] = str(l.WeirCheckpoint)
	}
	if len(l.Parents) > 0 { // a string set may not be empty
		item[attrParents] = &types.AttributeValueMemberSS{Value: l.Parents}
	}
	return item
}

// decodeLease reads a lease item; attributes it does not know (KCL 2.x adds
// some) are ignored, and kept in the table since every write is an update.
func decodeLease(item map[string]types.AttributeValue) (Lease, error) {
	var l Lease
	var err error
	if l.Shard, err = getS(item, attrKey, true); err != nil {
		return l, err
	}
	if l.Owner, err = getS(item, attrOwner, false); err != nil {
		return l, fmt.Errorf("lease %s: %w", l.Shard, err)
	}
	if l.Checkpoint, err = getS(item, attrCheckpoint, false); err != nil {
		return l, fmt.Errorf("lease %s: %w", l.Shard, err)
	}
	if l.WeirCheckpoint, err = getS(item, attrWeirCheckpoint, false); err != nil {
		return l, fmt.Errorf("lease %s: %w", l.Shard, err)
	}
	for _, f := range []struct {
		name string
		dst  *int64
	}{{attrCounter, &l.Counter}, {attrSubSeq, &l.SubSequence}, {attrOwnerSwitches, &l.OwnerSwitches}} {
		if *f.dst, err = getN(item, f.name); err != nil {
			return l, fmt.Errorf("lease %s: %w", l.Shard, err)
		}
	}
	switch v := item[attrParents].(type) {
	case nil:
	case *types.AttributeValueMemberSS:
		l.Parents = v.Value
	default:
		return l, fmt.Errorf("lease %s: %s is %T, want a string set", l.Shard, attrParents, v)
	}
	return l, nil
}

func getS(item map[string]types.AttributeValue, name string, required bool) (string, error) {
	switch v := item[name].(type) {
	case nil:
		if required {
			return "", fmt.Errorf("lease item without %s", name)
		}
		return "", nil
	case *types.AttributeValueMemberS:
		return v.Value, nil
	case *types.AttributeValueMemberNULL:
		return "", nil
	default:
		return "", fmt.Errorf("%s is %T, want a string", name, v)
	}
}

func getN(item map[string]types.AttributeValue, name string) (int64, error) {
	switch v := item[name].(type) {
	case nil, *types.AttributeValueMemberNULL:
		return 0, nil
	case *types.AttributeValueMemberN:
		n, err := strconv.ParseInt(v.Value, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s %q: %w", name, v.Value, err)
		}
		return n, nil
	default:
		return 0, fmt.Errorf("%s is %T, want a number", name, v)
	}
}
