package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/smithy-go/middleware"

	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/letters/lettertable"
)

// replayAttr is the attribute of a letter's item that holds its replay
// state: a map of state ("putting", "done" or "refused"), at (RFC 3339),
// stream, for "putting" kinesisAt (RFC 3339, Kinesis's time before the
// put, if known), owner (the claiming run's name) and until (RFC 3339,
// the end of its claim on DynamoDB's clock; none once released), and for
// "done" shard and seq. Replay sets it with conditional UpdateItems, each
// only if the state is still the one it read, so that two replays never
// both claim a letter, and a run puts a letter only while its claim
// lasts, so that no other run takes the letter over meanwhile.
const replayAttr = lettertable.ReplayAttr

// tableStore keeps the replay state of letters on their items of table.
type tableStore struct {
	c     *ddb.Client
	table string
	// run names this run in its claims (journalEntry.Owner), and dynamo
	// tells DynamoDB's time, on which claims end; replayTable sets both.
	run    string
	dynamo *serverClock
}

// serverClock tells where DynamoDB's clock stands, from the Date of its
// latest answer (whole seconds) and the time this machine's clock counted
// since, so that runs on machines whose clocks disagree judge a claim's
// end alike. Without an answer that had a Date it is the machine's clock,
// and so is a nil serverClock (a tableStore replayTable did not set up).
type serverClock struct {
	clk clock.Clock

	mu         sync.Mutex
	date       time.Time // the Date of the latest answer that had one
	sent, recv time.Time // on clk, when its request was sent and its answer came
}

// now returns the time on the machine's clock.
func (c *serverClock) now() time.Time {
	if c == nil {
		return time.Now()
	}
	return c.clk.Now()
}

// observe notes the Date of md, the metadata of an answer to a request
// sent at sent (on the machine's clock), if it has one.
func (c *serverClock) observe(sent time.Time, md middleware.Metadata) {
	date, ok := awsmiddleware.GetServerTime(md)
	if c == nil || !ok || date.IsZero() {
		return
	}
	recv := c.clk.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.date, c.sent, c.recv = date, sent, recv
}

// earliest returns a time DynamoDB's clock has reached: the Date of its
// latest answer, which it had reached when it answered, and the time
// since the answer came.
func (c *serverClock) earliest() time.Time {
	return c.since(0, func(c *serverClock) time.Time { return c.recv })
}

// latest returns a time DynamoDB's clock has not reached: the Date of its
// latest answer and a second (a Date is rounded down to the second),
// which its clock had not reached when the request was sent, and the
// time since it was sent.
func (c *serverClock) latest() time.Time {
	return c.since(time.Second, func(c *serverClock) time.Time { return c.sent })
}

// since returns the Date of the latest answer and d, and the time since
// the moment from returns; the machine's time if there is no Date.
func (c *serverClock) since(d time.Duration, from func(*serverClock) time.Time) time.Time {
	now := c.now()
	if c == nil {
		return now
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.date.IsZero() {
		return now
	}
	return c.date.Add(d + now.Sub(from(c)))
}

// newRun returns a name for a run of replay: 80 random bits, so that no
// two runs share one.
func newRun() string { return rand.Text()[:16] }

// dynamoDB is a DynamoDB client configured as the AWS SDK's default chain
// says, with endpoint and region, if given, instead.
func dynamoDB(ctx context.Context, endpoint, region string) (*ddb.Client, error) {
	cfg, err := awsConfig(ctx, endpoint, region)
	if err != nil {
		return nil, err
	}
	return ddb.NewFromConfig(cfg, func(o *ddb.Options) {
		if endpoint != "" {
			o.BaseEndpoint = &endpoint
		}
	}), nil
}

// Scan reads the table, noting DynamoDB's time from its answers: s is
// the Scanner of lettertable.Scan.
func (s tableStore) Scan(ctx context.Context, in *ddb.ScanInput, optFns ...func(*ddb.Options)) (*ddb.ScanOutput, error) {
	sent := s.dynamo.now()
	res, err := s.c.Scan(ctx, in, optFns...)
	if err == nil {
		s.dynamo.observe(sent, res.ResultMetadata)
	}
	return res, err
}

// read returns the letters of the table and the replay state of those
// that have one, by ID.
func (s tableStore) read(ctx context.Context) ([]letter, map[string]journalEntry, error) {
	es, err := lettertable.Scan(ctx, s, s.table)
	if err != nil {
		return nil, nil, err
	}
	ls := make([]letter, len(es))
	state := make(map[string]journalEntry)
	for i, e := range es {
		ls[i] = letter{id: e.ID, key: e.Key, DeadLetter: e.Letter}
		m, ok := e.Item[replayAttr].(*types.AttributeValueMemberM)
		if !ok {
			continue
		}
		id := e.ID
		times := map[string]time.Time{}
		for _, name := range []string{"at", "kinesisAt", "until"} {
			v := lettertable.S(m.Value, name)
			if v == "" && name != "at" {
				continue
			}
			if times[name], err = time.Parse(time.RFC3339Nano, v); err != nil {
				return nil, nil, fmt.Errorf("deadletter table %s: letter %s: attribute %s: %s: %w", s.table, id, replayAttr, name, err)
			}
		}
		state[id] = journalEntry{ID: id, State: lettertable.S(m.Value, "state"), At: times["at"],
			Stream: lettertable.S(m.Value, "stream"), Shard: lettertable.S(m.Value, "shard"), Seq: lettertable.S(m.Value, "seq"),
			Kinesis: times["kinesisAt"], Owner: lettertable.S(m.Value, "owner"), Until: times["until"]}
	}
	return ls, state, nil
}

// mark sets the replay state of l's item to next if it is still prev
// (none if prev is zero), or already next: an update the SDK sent again
// after its answer was lost.
func (s tableStore) mark(ctx context.Context, l letter, prev, next journalEntry) error {
	str := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	v := map[string]types.AttributeValue{
		"state":  str(next.State),
		"at":     str(next.At.Format(time.RFC3339Nano)),
		"stream": str(next.Stream),
	}
	if !next.Kinesis.IsZero() {
		v["kinesisAt"] = str(next.Kinesis.Format(time.RFC3339Nano))
	}
	if next.Owner != "" {
		v["owner"] = str(next.Owner)
	}
	if !next.Until.IsZero() {
		v["until"] = str(next.Until.Format(time.RFC3339Nano))
	}
	if next.Shard != "" {
		v["shard"] = str(next.Shard)
		v["seq"] = str(next.Seq)
	}
	values := map[string]types.AttributeValue{":r": &types.AttributeValueMemberM{Value: v}}
	// is returns the condition that the item's state is e: its state,
	// time, owner and claim's end, each absent where e has none (a
	// state written before weir named owners has neither). A renewal
	// changes the claim's end: a run that read the claim before it
	// cannot take it over after it.
	is := func(p string, e journalEntry) string {
		values[":"+p+"s"], values[":"+p+"at"] = str(e.State), str(e.At.Format(time.RFC3339Nano))
		c := "#r.#s = :" + p + "s AND #r.#at = :" + p + "at"
		if e.Owner == "" {
			c += " AND attribute_not_exists(#r.#o)"
		} else {
			values[":"+p+"o"] = str(e.Owner)
			c += " AND #r.#o = :" + p + "o"
		}
		if e.Until.IsZero() {
			c += " AND attribute_not_exists(#r.#u)"
		} else {
			values[":"+p+"u"] = str(e.Until.Format(time.RFC3339Nano))
			c += " AND #r.#u = :" + p + "u"
		}
		return "(" + c + ")"
	}
	was := "attribute_not_exists(#r)"
	if prev.State != "" {
		was = is("p", prev)
	}
	in := &ddb.UpdateItemInput{
		TableName:        aws.String(s.table),
		Key:              l.key,
		UpdateExpression: aws.String("SET #r = :r"),
		ExpressionAttributeNames: map[string]string{"#r": replayAttr, "#k": lettertable.HashKey,
			"#s": "state", "#at": "at", "#o": "owner", "#u": "until"},
		ExpressionAttributeValues: values,
		// The item must exist: UpdateItem would otherwise create one.
		ConditionExpression: aws.String("attribute_exists(#k) AND (" + was + " OR " + is("n", next) + ")"),
	}
	sent := s.dynamo.now()
	res, err := s.c.UpdateItem(ctx, in)
	if err == nil {
		s.dynamo.observe(sent, res.ResultMetadata)
	}
	var changed *types.ConditionalCheckFailedException
	if errors.As(err, &changed) {
		return fmt.Errorf("letter %s: %w in table %s: it is no longer %q (another replay, or the letter deleted): run replay again: %w", l.id, errStateChanged, s.table, prev.State, err)
	}
	if err != nil {
		return fmt.Errorf("letter %s: marking it %s in table %s: %w", l.id, next.State, s.table, err)
	}
	return nil
}

// claim returns e with this run as its owner, and the end of its claim
// claimFor after the latest time DynamoDB's clock may be at.
func (s tableStore) claim(e journalEntry) journalEntry {
	e.Owner, e.Until = s.run, s.dynamo.latest().Add(claimFor)
	return e
}

// held reports whether e is a claim whose end DynamoDB's clock may not
// have reached: one with an owner and an end (a claim written before weir
// named owners, or released, has neither).
func (s tableStore) held(e journalEntry) bool {
	return e.Owner != "" && !e.Until.IsZero() && !s.dynamo.earliest().After(e.Until)
}

// lasts reports whether DynamoDB's clock is at least d before the end of
// claim e.
func (s tableStore) lasts(e journalEntry, d time.Duration) bool {
	return !s.dynamo.latest().Add(d).After(e.Until)
}

// reset names the update that removes l's replay state from its item.
func (s tableStore) reset(l letter, _ journalEntry) string {
	key := map[string]map[string]string{}
	for name, v := range l.key {
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			key[name] = map[string]string{"S": v.Value}
		case *types.AttributeValueMemberN:
			key[name] = map[string]string{"N": v.Value}
		}
	}
	k, _ := json.Marshal(key)
	return fmt.Sprintf("remove its replay state, while no replay runs: aws dynamodb update-item --table-name %s --key '%s' "+
		"--update-expression 'REMOVE #r' --expression-attribute-names '{\"#r\":\"%s\"}'", s.table, k, replayAttr)
}

// replayTable puts the chosen letters of a DynamoDB dead-letter table
// (ids, or all if none) into streamName, each at most once over every
// run, with the client kc makes once there are letters to put, and
// reports each to out.
func replayTable(ctx context.Context, kc func() (*kinesis.Client, error), clk clock.Clock, s tableStore, streamName string, ids []string, out io.Writer) error {
	s.run, s.dynamo = newRun(), &serverClock{clk: clk}
	all, state, err := s.read(ctx)
	if err != nil {
		return err
	}
	chosen, err := choose(all, ids, "-table "+s.table)
	if err != nil || len(chosen) == 0 {
		return noLetters(err, "-table "+s.table, out)
	}
	c, err := kc()
	if err != nil {
		return err
	}
	return replayEach(ctx, c, clk, s, state, chosen, streamName, out)
}

// listTable prints the letters of a DynamoDB dead-letter table, one a
// line, with what replay did.
func listTable(ctx context.Context, s tableStore, out io.Writer) error {
	ls, state, err := s.read(ctx)
	if err != nil {
		return err
	}
	return printLetters(ls, state, out)
}
