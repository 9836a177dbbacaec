package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/letters/lettertable"
)

// replayAttr is the attribute of a letter's item that holds its replay
// state: a map of state ("putting", "done" or "refused"), at (RFC 3339),
// stream, for "putting" kinesisAt (RFC 3339, Kinesis's time before the
// put, if known) and for "done" shard and seq. Replay sets it with conditional UpdateItems,
// each only if the state is still the one it read, so that two replays
// never both put a letter.
const replayAttr = lettertable.ReplayAttr

// tableStore keeps the replay state of letters on their items of table.
type tableStore struct {
	c     *ddb.Client
	table string
}

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

// read returns the letters of the table and the replay state of those
// that have one, by ID.
func (s tableStore) read(ctx context.Context) ([]letter, map[string]journalEntry, error) {
	es, err := lettertable.Scan(ctx, s.c, s.table)
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
		at, err := time.Parse(time.RFC3339Nano, lettertable.S(m.Value, "at"))
		if err != nil {
			return nil, nil, fmt.Errorf("deadletter table %s: letter %s: attribute %s: at: %w", s.table, id, replayAttr, err)
		}
		e := journalEntry{ID: id, State: lettertable.S(m.Value, "state"), At: at,
			Stream: lettertable.S(m.Value, "stream"), Shard: lettertable.S(m.Value, "shard"), Seq: lettertable.S(m.Value, "seq")}
		if kt := lettertable.S(m.Value, "kinesisAt"); kt != "" {
			if e.Kinesis, err = time.Parse(time.RFC3339Nano, kt); err != nil {
				return nil, nil, fmt.Errorf("deadletter table %s: letter %s: attribute %s: kinesisAt: %w", s.table, id, replayAttr, err)
			}
		}
		state[id] = e
	}
	return ls, state, nil
}

// mark sets the replay state of l's item to next if it is still prev
// (none if prev is zero).
func (s tableStore) mark(ctx context.Context, l letter, prev, next journalEntry) error {
	v := map[string]types.AttributeValue{
		"state":  &types.AttributeValueMemberS{Value: next.State},
		"at":     &types.AttributeValueMemberS{Value: next.At.Format(time.RFC3339Nano)},
		"stream": &types.AttributeValueMemberS{Value: next.Stream},
	}
	if !next.Kinesis.IsZero() {
		v["kinesisAt"] = &types.AttributeValueMemberS{Value: next.Kinesis.Format(time.RFC3339Nano)}
	}
	if next.Shard != "" {
		v["shard"] = &types.AttributeValueMemberS{Value: next.Shard}
		v["seq"] = &types.AttributeValueMemberS{Value: next.Seq}
	}
	in := &ddb.UpdateItemInput{
		TableName:                aws.String(s.table),
		Key:                      l.key,
		UpdateExpression:         aws.String("SET #r = :r"),
		ExpressionAttributeNames: map[string]string{"#r": replayAttr, "#k": lettertable.HashKey, "#s": "state", "#at": "at"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":r": &types.AttributeValueMemberM{Value: v},
			":ns": v["state"], ":nat": v["at"]},
		// The item must exist: UpdateItem would otherwise create one. A
		// state already next (its state and time) is this very update,
		// applied by an attempt whose answer was lost and retried by the
		// SDK.
		ConditionExpression: aws.String("attribute_exists(#k) AND (attribute_not_exists(#r) OR (#r.#s = :ns AND #r.#at = :nat))"),
	}
	if prev.State != "" {
		in.ConditionExpression = aws.String("attribute_exists(#k) AND ((#r.#s = :s AND #r.#at = :at) OR (#r.#s = :ns AND #r.#at = :nat))")
		in.ExpressionAttributeValues[":s"] = &types.AttributeValueMemberS{Value: prev.State}
		in.ExpressionAttributeValues[":at"] = &types.AttributeValueMemberS{Value: prev.At.Format(time.RFC3339Nano)}
	}
	_, err := s.c.UpdateItem(ctx, in)
	var changed *types.ConditionalCheckFailedException
	if errors.As(err, &changed) {
		return fmt.Errorf("letter %s: its replay state in table %s is no longer %q (another replay, or the letter deleted): run replay again, alone: %w", l.id, s.table, prev.State, err)
	}
	if err != nil {
		return fmt.Errorf("letter %s: marking it %s in table %s: %w", l.id, next.State, s.table, err)
	}
	return nil
}

// replayTable puts the chosen letters of a DynamoDB dead-letter table
// (ids, or all if none) into streamName, each at most once over every
// run, with the client kc makes once there are letters to put, and
// reports each to out.
func replayTable(ctx context.Context, kc func() (*kinesis.Client, error), clk clock.Clock, s tableStore, streamName string, ids []string, out io.Writer) error {
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
