package lease

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/internal/checkpointer"
	"github.com/weirstream/weir/internal/dynamosafe"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/attempt"
	"github.com/weirstream/weir/internal/awsconf"
	"github.com/weirstream/weir/internal/awserr"
	"github.com/weirstream/weir/internal/backoff"
	"github.com/weirstream/weir/internal/dynamotable"
	"github.com/weirstream/weir/internal/streak"
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

// ensureMaxUnanswered is how many DescribeTable calls in a row Ensure lets
// go unanswered (every attempt of each timed out) before it gives up: with
// the default client (three attempts a call) and AttemptTimeout (2s), a
// minute or two, about as long as the Kinesis receiver's start-up tries
// (kinesis.Config.MaxAttempts).
const ensureMaxUnanswered = 10

// TableConfig configures a Table.
type TableConfig struct {
	// Name is the DynamoDB table name: 3 to 255 of [a-zA-Z0-9_.-]. Required.
	Name string
	// Client is the DynamoDB client, usually a *dynamodb.Client. Required.
	Client leasetable.DynamoDBAPI
	// Clock times the waits of Ensure. Default clock.Real{}.
	Clock clock.Clock
	// PollInterval is the longest wait between two checks of Ensure that
	// a new table is ACTIVE: the waits start at 25ms and double, with
	// jitter, up to it. Default DefaultPollInterval (1s).
	PollInterval time.Duration
	// AttemptTimeout bounds each attempt of every DynamoDB call (see
	// leasetable.Config.AttemptTimeout). Default 0: none. It takes effect through the
	// per-call options of the client's methods, as *dynamodb.Client applies
	// them.
	AttemptTimeout time.Duration
}

func (c TableConfig) problems() []error {
	var problems []error
	if err := dynamotable.CheckName(c.Name); err != nil {
		problems = append(problems, err)
	}
	if c.Client == nil {
		problems = append(problems, errors.New("DynamoDB client is nil: pass a *dynamodb.Client"))
	}
	if c.PollInterval < 0 {
		problems = append(problems, fmt.Errorf("PollInterval %v: must be >= 0 (0 means %v)", c.PollInterval, DefaultPollInterval))
	}
	if c.AttemptTimeout < 0 {
		problems = append(problems, fmt.Errorf("AttemptTimeout %v: must be >= 0 (0 means none)", c.AttemptTimeout))
	}
	return problems
}

// Table is the lease and checkpoint table. Every write is a single-item
// conditional write; a write whose condition fails returns an error wrapping
// checkpointer.ErrLeaseLost. A Table is safe for concurrent use; it keeps no state but its
// configuration and the time of DynamoDB's clock its answers tell (see
// serverTime).
type Table struct {
	name string
	db   leasetable.DynamoDBAPI // given, wrapped: a panic in it fails the call (internal/dynamosafe)
	// given is the client as given, whose options dynamosafe hides (see
	// silence).
	given leasetable.DynamoDBAPI
	clk   clock.Clock
	poll  time.Duration
	// pageLimit, when > 0, limits the items of one Scan page (tests).
	pageLimit int32
	// eventualScans makes ListAll read eventually consistently, as the
	// KCL's scans do by default (consistentReads false): the cost
	// benchmark's baseline only. weir's own scans read consistently: a scan
	// that missed this worker's own take could make it drop a lease it
	// holds.
	eventualScans bool
	// opts are the per-call options of every call: the attempt timeout,
	// and the record of each answer's Date in server.
	opts []func(*dynamodb.Options)
	// server is the time on DynamoDB's clock, from the Date of its
	// answers: the pin of a lease at LATEST is taken from it.
	server *serverTime
	// log receives Ensure's warnings.
	log *slog.Logger
}

// NewTable validates cfg and returns a Table; it does no I/O (see Ensure).
func NewTable(cfg TableConfig) (*Table, error) {
	if p := cfg.problems(); len(p) > 0 {
		return nil, fmt.Errorf("%w: %w", leasetable.ErrInvalidConfig, errors.Join(p...))
	}
	return newTable(cfg, slog.Default()), nil
}

func newTable(cfg TableConfig, log *slog.Logger) *Table {
	t := &Table{name: cfg.Name, db: dynamosafe.Wrap(cfg.Client), given: cfg.Client, clk: clock.Or(cfg.Clock), poll: cmp.Or(cfg.PollInterval, DefaultPollInterval), log: log}
	t.server = &serverTime{clk: t.clk}
	mws := []func(*middleware.Stack) error{t.server.middleware()}
	if cfg.AttemptTimeout > 0 {
		mws = append(mws, attempt.Middleware(t.clk, cfg.AttemptTimeout))
	}
	t.opts = []func(*dynamodb.Options){func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, mws...) }}
	return t
}

// Name returns the table name.
func (t *Table) Name() string { return t.name }

// Ensure makes the table usable: it creates it (hash key leaseKey, on-demand
// billing) if it does not exist, waits until it is ACTIVE or UPDATING (which
// serves reads and writes too), and checks that its key is leaseKey. A
// table whose status no wait cures (its KMS key inaccessible, or archived
// for it) fails Ensure at once, naming the fix; one that stays CREATING,
// DELETING or of a status weir does not know is waited for as
// dynamotable.Wait says: a WARN after 30s (at once for an unknown status),
// an error after 5 minutes, each naming the status and the fix. A
// DynamoDB that does not answer (every attempt timed out: see
// TableConfig.AttemptTimeout), or fails a DescribeTable or the
// CreateTable in a way a retry may heal (a cut connection, a server
// error, throttling), is logged at WARN at once, naming the endpoint, and
// again as the failures go on (5, 10, 20... in a row); Ensure gives up
// after 10 such calls in a row. The warnings go to
// slog.Default() for a Table of NewTable, to the Coordinator's logger for
// its own.
func (t *Table) Ensure(ctx context.Context) error {
	created := false
	wait := backoff.Policy{Base: min(firstPoll, t.poll), Max: t.poll}.Start()
	silent := t.silence(ctx)
	tw := dynamotable.Wait{Table: t.name, Prefix: "leasetable", Logger: t.log}
	unanswered := 0
	for {
		out, err := t.db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &t.name}, t.opts...)
		var notFound *types.ResourceNotFoundException
		silent.Op = "DescribeTable"
		justCreated := false
		if errors.As(err, &notFound) && !created {
			// A failed CreateTable is retried as a failed DescribeTable
			// is, within the same bound: the streak goes on over both.
			silent.Op = "CreateTable"
			if err = t.create(ctx); err == nil {
				created, justCreated = true, true
			}
		}
		status := "not found"
		if unanswered > 0 && (err == nil || errors.As(err, &notFound)) {
			silent.Ended(unanswered + 1) // DynamoDB answers again
			unanswered = 0
		}
		switch {
		case justCreated:
			continue
		case errors.As(err, &notFound):
			// Created (by us or another worker) but not visible yet: wait,
			// rather than create again at once, which would spin.
			if _, err := tw.Check(dynamotable.Missing, t.clk.Now()); err != nil {
				return fmt.Errorf("leasetable: %w", err)
			}
		case errors.Is(err, attempt.ErrTimeout):
			unanswered++
			if unanswered >= ensureMaxUnanswered {
				return fmt.Errorf("leasetable: table %s: DynamoDB at %s answered none of %d calls in a row (the last a %s): %w; fix: %s",
					t.name, silent.Endpoint, unanswered, silent.Op, err, silentFix("timeout", silent.Endpoint))
			}
			silent.Failed(unanswered, "timeout", true, err)
			status = "no answer" // every attempt timed out: ask again
		case err != nil && !awserr.Refused(err) && ctx.Err() == nil:
			// A refused or cut connection, a server error, throttling:
			// DynamoDB may be restarting or briefly unreachable. Warn at
			// once and try again, within the same bound as no answer.
			unanswered++
			if unanswered >= ensureMaxUnanswered {
				return fmt.Errorf("leasetable: table %s: DynamoDB at %s failed %d calls in a row (the last a %s): %w; fix: %s",
					t.name, silent.Endpoint, unanswered, silent.Op, err, silentFix("error", silent.Endpoint))
			}
			silent.Failed(unanswered, "error", true, err)
			status = "unreachable"
		case err != nil && silent.Op == "CreateTable":
			return withRefusedFix(err, t.name, silent.Op) // named by create
		case err != nil:
			return withRefusedFix(fmt.Errorf("leasetable: describe table %s: %w", t.name, err), t.name, silent.Op)
		case out.Table == nil:
			return fmt.Errorf("leasetable: describe table %s: %w", t.name, dynamotable.ErrNoDescription)
		default:
			// ACTIVE, or UPDATING (capacity or billing mode changed, an
			// index built: up to an hour), serves reads and writes; a
			// status no wait cures, or a wait too long, ends Ensure.
			usable, err := tw.Check(out.Table.TableStatus, t.clk.Now())
			switch {
			case err != nil:
				return fmt.Errorf("leasetable: %w", err)
			case usable:
				return checkKeySchema(t.name, out.Table)
			}
			status = string(out.Table.TableStatus)
		}
		if err := wait.Wait(ctx, t.clk); err != nil {
			return fmt.Errorf("leasetable: waiting for table %s (status %s) to be ACTIVE or UPDATING: %w", t.name, status, err)
		}
	}
}

// withRefusedFix returns err, the error of a call op on table that
// DynamoDB refused for good, with the fix appended when it is known.
func withRefusedFix(err error, table, op string) error {
	switch {
	case awserr.AccessDenied(err):
		return fmt.Errorf("%w; fix: allow dynamodb:%s on table %s to these credentials (docs/iam/dynamodb-leases.json; "+
			"CreateTable, to create the table, is in docs/iam/provisioning.json)", err, op, table)
	case awserr.BadCredentials(err):
		return fmt.Errorf("%w; fix: the credentials are not valid for this account and region: check Leases.AWS "+
			"(access key, secret, session token, region) or the client given as Leases.DynamoDB", err)
	}
	return err
}

// silence returns the streak watcher of Ensure's calls that get no answer.
func (t *Table) silence(ctx context.Context) streak.Streak {
	return streak.Streak{
		Logger: t.log, Clock: t.clk, Prefix: "leasetable", Service: "DynamoDB",
		Op: "DescribeTable", Attr: slog.String("table", t.name),
		Endpoint: awsconf.DynamoDBEndpoint(ctx, t.given), MaxAttempts: ensureMaxUnanswered, Fix: silentFix,
	}
}

// silentFix is the fix of a DynamoDB that does not answer.
func silentFix(cause, endpoint string) string {
	what := " does not answer within AttemptTimeout"
	if cause != "timeout" {
		what = " cannot be reached"
	}
	return "DynamoDB at " + endpoint + what + ": check the lease table's Endpoint, the region (AWS_REGION), proxies and the network"
}

func (t *Table) create(ctx context.Context) error {
	_, err := t.db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            &t.name,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(attrKey), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(attrKey), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	}, t.opts...)
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) { // in use: another worker created it first
		return fmt.Errorf("leasetable: create table %s: %w", t.name, err)
	}
	return nil
}

// checkKeySchema reports a table whose key is not a lease table's: a hash
// key leaseKey of type string, and nothing else. Every write of a lease in
// another table would fail.
func checkKeySchema(name string, desc *types.TableDescription) error {
	const fix = "fix: set the lease TableName to a table of weir's own (it is created if missing), or delete this one"
	ks := desc.KeySchema
	if len(ks) != 1 || aws.ToString(ks[0].AttributeName) != attrKey || ks[0].KeyType != types.KeyTypeHash {
		return fmt.Errorf("leasetable: table %s: key schema %v is not a lease table's (hash key %s only); %s", name, keyNames(ks), attrKey, fix)
	}
	for _, d := range desc.AttributeDefinitions {
		if aws.ToString(d.AttributeName) == attrKey && d.AttributeType != types.ScalarAttributeTypeS {
			return fmt.Errorf("leasetable: table %s: key schema: hash key %s is of type %s, not a lease table's S (string: the shard ID); %s", name, attrKey, d.AttributeType, fix)
		}
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

// List returns every lease, read consistently, in no particular order. If
// some items cannot be read as leases, it returns the others together with
// an error joining a *leasetable.BadItemError for each (errors.Is(err, leasetable.ErrBadItem));
// ListAll separates them. Items of other KCL entity types are left out.
func (t *Table) List(ctx context.Context) ([]Lease, error) {
	leases, bad, err := t.ListAll(ctx)
	if err != nil {
		return nil, err
	}
	if len(bad) > 0 {
		errs := make([]error, len(bad))
		for i, b := range bad {
			errs[i] = b
		}
		return leases, errors.Join(errs...)
	}
	return leases, nil
}

// ListAll scans the whole table, read consistently: it returns every lease,
// in no particular order, and every item it cannot read as a lease. err is
// for a failed scan only, and then nothing else is returned.
func (t *Table) ListAll(ctx context.Context) (leases []Lease, bad []*leasetable.BadItemError, err error) {
	sc, err := t.scan(ctx)
	return sc.leases, sc.bad, err
}

// scanned is what one scan of the table found.
type scanned struct {
	leases []Lease
	bad    []*leasetable.BadItemError
	beats  map[string]map[string]beatVal // leaseKey -> the beats on that item (beatsOf), unreadable leases included
}

// scan is ListAll that also returns the beats on every lease.
func (t *Table) scan(ctx context.Context) (scanned, error) {
	var sc scanned
	in := &dynamodb.ScanInput{TableName: &t.name, ConsistentRead: aws.Bool(!t.eventualScans)}
	for {
		if t.pageLimit > 0 {
			in.Limit = &t.pageLimit
		}
		out, err := t.db.Scan(ctx, in, t.opts...)
		if err != nil {
			return scanned{}, fmt.Errorf("leasetable: scan %s: %w", t.name, err)
		}
		for _, item := range out.Items {
			l, ok, err := t.decode(item)
			var b *leasetable.BadItemError
			key := l.Shard
			switch {
			case errors.As(err, &b):
				sc.bad = append(sc.bad, b)
				key = b.Key // a lease gone bad may still carry beats
			case !ok:
				continue
			default:
				sc.leases = append(sc.leases, l)
			}
			if beats := beatsOf(item); len(beats) > 0 {
				if sc.beats == nil {
					sc.beats = make(map[string]map[string]beatVal)
				}
				sc.beats[key] = beats
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			return sc, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// decode is decodeLease with the table named in its error.
func (t *Table) decode(item map[string]types.AttributeValue) (Lease, bool, error) {
	l, ok, err := decodeLease(item)
	var b *leasetable.BadItemError
	if errors.As(err, &b) {
		b.Table = t.name
	}
	return l, ok, err
}

// Get returns shard's lease, read consistently, and false if it has none
// (or its item is of another KCL entity type). An item that cannot be read
// as a lease returns a *leasetable.BadItemError.
func (t *Table) Get(ctx context.Context, shard string) (Lease, bool, error) {
	return t.get(ctx, shard, true)
}

// peek is Get read eventually consistently, at half the cost: the answer
// may be a version older than the last write (typically by under a
// second), which the liveness check allows for (see checkOwners).
func (t *Table) peek(ctx context.Context, shard string) (Lease, bool, error) {
	return t.get(ctx, shard, false)
}

func (t *Table) get(ctx context.Context, shard string, consistent bool) (Lease, bool, error) {
	out, err := t.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &t.name, Key: keyOf(shard), ConsistentRead: aws.Bool(consistent),
	}, t.opts...)
	if err != nil {
		return Lease{}, false, fmt.Errorf("leasetable: get shard %s: %w", shard, err)
	}
	if out.Item == nil {
		return Lease{}, false, nil
	}
	return t.decode(out.Item)
}

// Create writes l as a new lease unless the shard already has one; it reports
// whether it wrote. l.Counter and l.OwnerSwitches are written as given
// (normally 0), and l.Checkpoint defaults to checkpointer.TrimHorizon.
func (t *Table) Create(ctx context.Context, l Lease) (bool, error) {
	if l.Checkpoint == "" {
		l.Checkpoint = checkpointer.TrimHorizon
	}
	_, err := t.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:           &t.name,
		Item:                encodeLease(l),
		ConditionExpression: aws.String("attribute_not_exists(" + attrKey + ")"),
	}, t.opts...)
	return applied(err, "create lease "+l.Shard)
}

// applied returns whether a conditional write took effect: false and no
// error when its condition failed, err wrapped with what when it failed
// otherwise.
func applied(err error, what string) (bool, error) {
	var failed *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &failed):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("leasetable: %s: %w", what, err)
	}
	return true, nil
}

// Renew extends l, held by l.Owner: it adds one to the counter if the owner
// and counter are still those of l, and returns the lease as written. It
// returns an error wrapping checkpointer.ErrLeaseLost if they are not.
func (t *Table) Renew(ctx context.Context, l Lease) (Lease, error) {
	if l.Owner == "" {
		return Lease{}, fmt.Errorf("leasetable: renew shard %s: lease has no owner", l.Shard)
	}
	return t.update(ctx, "renew", l, "", nil)
}

// Take makes owner the holder of l (expired, unowned, or stolen), if its owner
// and counter are still those of l: it sets the owner, adds one to the
// counter and, if it had another owner, to ownerSwitchesSinceCheckpoint,
// and removes checkpointOwner (a KCL 3.x hand-off in progress), as the
// KCL's take does. It also writes l.Parents to parentShardId, which
// migrates items weir wrote under the old name parentShardIds. It does not
// pin a lease at LATEST (Lease.LatestAt); a Coordinator's take does. It returns
// the lease as written, or an error wrapping checkpointer.ErrLeaseLost if
// another worker wrote the lease since l was read.
func (t *Table) Take(ctx context.Context, l Lease, owner string) (Lease, error) {
	return t.take(ctx, l, owner, time.Time{})
}

// take is Take that also pins a lease at LATEST without a pin
// (Lease.LatestAt) to pin, unless pin is the zero time.
func (t *Table) take(ctx context.Context, l Lease, owner string, pin time.Time) (Lease, error) {
	if owner == "" {
		return Lease{}, fmt.Errorf("leasetable: take shard %s: empty owner", l.Shard)
	}
	set := ", #owner = :newowner"
	values := map[string]types.AttributeValue{":newowner": str(owner)}
	if l.Owner != "" && owner != l.Owner { // as KCL: taking an unowned lease is no switch
		set += ", #switches = if_not_exists(#switches, :zero) + :one"
		values[":zero"] = num(0)
	}
	if len(l.Parents) > 0 {
		set += ", #parents = :parents"
		values[":parents"] = &types.AttributeValueMemberSS{Value: l.Parents}
	}
	if l.Checkpoint == checkpointer.LatestPosition && l.LatestAt.IsZero() && !pin.IsZero() {
		set += ", #latestat = if_not_exists(#latestat, :latestat)"
		values[":latestat"] = num(pin.UnixMilli())
	}
	if l.CheckpointOwner != "" {
		set += " REMOVE #ckptowner"
	}
	return t.update(ctx, "take", l, set, values)
}

// Release hands l back: it removes the owner and adds one to the counter if
// the owner and counter are still those of l (else checkpointer.ErrLeaseLost). Any worker
// may then take it.
func (t *Table) Release(ctx context.Context, l Lease) (Lease, error) {
	if l.Owner == "" {
		return Lease{}, fmt.Errorf("leasetable: release shard %s: lease has no owner", l.Shard)
	}
	return t.update(ctx, "release", l, " REMOVE #owner", nil)
}

// Checkpoint stores checkpoint (a sequence number, or checkpointer.ShardEnd, checkpointer.TrimHorizon,
// checkpointer.LatestPosition, checkpointer.AtTimestamp) and subSeq in l, and checkpoint again in
// weirCheckpoint (see Lease.WrittenByWeir), resets
// ownerSwitchesSinceCheckpoint and adds one to the counter, if the owner and
// counter are still those of l. Otherwise it returns an error wrapping
// checkpointer.ErrLeaseLost and writes nothing: a worker that lost a lease can never
// checkpoint it again.
func (t *Table) Checkpoint(ctx context.Context, l Lease, seq string, subSeq int64) (Lease, error) {
	return t.checkpoint(ctx, l, seq, subSeq, nil)
}

// checkpointEnd is Checkpoint at checkpointer.ShardEnd that also stores the
// shard's children in childShardIds when known, as the KCL does at a
// shard's end.
func (t *Table) checkpointEnd(ctx context.Context, l Lease, children []string) (Lease, error) {
	return t.checkpoint(ctx, l, checkpointer.ShardEnd, 0, children)
}

func (t *Table) checkpoint(ctx context.Context, l Lease, seq string, subSeq int64, children []string) (Lease, error) {
	if l.Owner == "" {
		return Lease{}, fmt.Errorf("leasetable: checkpoint shard %s: lease has no owner", l.Shard)
	}
	if !validCheckpoint(seq) {
		return Lease{}, fmt.Errorf("leasetable: checkpoint shard %s: %q is neither a sequence number nor %s, %s, %s or %s",
			l.Shard, seq, checkpointer.TrimHorizon, checkpointer.LatestPosition, checkpointer.AtTimestamp, checkpointer.ShardEnd)
	}
	set := ", #ckpt = :ckpt, #weirckpt = :ckpt, #subseq = :subseq, #switches = :zero"
	values := map[string]types.AttributeValue{":ckpt": str(seq), ":subseq": num(subSeq), ":zero": num(0)}
	if len(children) > 0 {
		set += ", #children = :children"
		values[":children"] = &types.AttributeValueMemberSS{Value: children}
	}
	if !l.LatestAt.IsZero() {
		set += " REMOVE #latestat" // the pin only means something at LATEST
	}
	return t.update(ctx, "checkpoint", l, set, values)
}

// update runs one conditional UpdateItem on l: it always adds one to the
// counter, adds extra (which begins with ", " for more SET clauses or " " for
// a REMOVE or DELETE clause), and is conditional on l's owner and counter.
func (t *Table) update(ctx context.Context, op string, l Lease, extra string, values map[string]types.AttributeValue) (Lease, error) {
	return t.updateIf(ctx, op, l, extra, values, "")
}

// updateIf is update also conditional on andCond, if not empty.
func (t *Table) updateIf(ctx context.Context, op string, l Lease, extra string, values map[string]types.AttributeValue, andCond string) (Lease, error) {
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
	if andCond != "" {
		cond += " AND " + andCond
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
	}, t.opts...)
	var failed *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &failed):
		return Lease{}, fmt.Errorf("leasetable: %s shard %s (owner %q, counter %d): %w", op, l.Shard, l.Owner, l.Counter, checkpointer.ErrLeaseLost)
	case err != nil:
		return Lease{}, fmt.Errorf("leasetable: %s shard %s: %w", op, l.Shard, err)
	}
	nl, _, err := t.decode(out.Attributes)
	if err != nil {
		return Lease{}, fmt.Errorf("leasetable: %s shard %s: written, but %w", op, l.Shard, err)
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
	case "#parents":
		return attrParents, true
	case "#children":
		return attrChildren, true
	case "#ckptowner":
		return attrCkptOwner, true
	case "#latestat":
		return attrLatestAt, true
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
