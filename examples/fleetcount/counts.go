package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"golang.org/x/sync/errgroup"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/stream"
)

// maxKeyBytes is the longest partition key value DynamoDB stores; it also
// refuses an empty one.
const maxKeyBytes = 2048

// countTable is the DynamoDB table of the counts: an item per key, with
// key (S, the hash key) and count (N).
type countTable struct {
	db     *dynamodb.Client
	name   string
	logger *slog.Logger

	mu      sync.Mutex
	written map[string]int64 // this worker's latest count per key
	sum     int64            // of written
}

// openCountTable uses the table name if it exists with the expected key,
// and creates it (on-demand billing) otherwise, waiting until it is ACTIVE
// (an existing table UPDATING is used at once: it serves reads and writes).
func openCountTable(ctx context.Context, db *dynamodb.Client, name string, logger *slog.Logger) (*countTable, error) {
	t := &countTable{db: db, name: name, logger: logger, written: map[string]int64{}}
	out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &name})
	var missing *types.ResourceNotFoundException
	switch {
	case errors.As(err, &missing):
		_, err = db.CreateTable(ctx, &dynamodb.CreateTableInput{
			TableName:            &name,
			AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("key"), AttributeType: types.ScalarAttributeTypeS}},
			KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("key"), KeyType: types.KeyTypeHash}},
			BillingMode:          types.BillingModePayPerRequest,
		})
		var inUse *types.ResourceInUseException // another worker created it first
		if err != nil && !errors.As(err, &inUse) {
			return nil, fmt.Errorf("create table %s%s: %w", name, unanswered(err, "-dynamodb-endpoint"), err)
		}
	case err != nil:
		return nil, fmt.Errorf("describe table %s%s: %w", name, unanswered(err, "-dynamodb-endpoint"), err)
	default:
		ks := out.Table.KeySchema
		if len(ks) != 1 || aws.ToString(ks[0].AttributeName) != "key" {
			return nil, fmt.Errorf("table %s exists with another key: -table must name a table whose only key is the string \"key\", or one that does not exist", name)
		}
		// UPDATING (capacity or billing mode changed, an index built: up
		// to an hour) serves reads and writes as ACTIVE does.
		if st := out.Table.TableStatus; st == types.TableStatusActive || st == types.TableStatusUpdating {
			return t, nil
		}
	}
	waiter := dynamodb.NewTableExistsWaiter(db, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 100*time.Millisecond, 5*time.Second
	})
	if err := waiter.Wait(ctx, &dynamodb.DescribeTableInput{TableName: &name}, 5*time.Minute); err != nil {
		return nil, fmt.Errorf("wait for table %s to be ACTIVE: %w", name, err)
	}
	return t, nil
}

// write writes the counts of a batch, the running count of each key after
// each of its records: each key's last (and greatest) one. Every write is
// conditional, so that a count never moves backwards: a batch run again,
// or counts of a key written by two workers while its shard changed hands,
// leave the greatest count in the table. It returns the number of keys
// written.
func (t *countTable) write(ctx context.Context, b *batch.Batch[stream.Pair[string, int64]]) (int, error) {
	latest := map[string]int64{}
	skipped := 0
	for c := range b.All() {
		if c.Key == "" || len(c.Key) > maxKeyBytes {
			skipped++
			continue
		}
		latest[c.Key] = max(latest[c.Key], c.Value)
	}
	if skipped > 0 {
		t.logger.Warn("records whose key DynamoDB cannot store (empty or over 2048 bytes) are counted but not written",
			"batch", b.Time().Std(), "records", skipped)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for key, n := range latest {
		g.Go(func() error { return t.put(gctx, key, n) })
	}
	if err := g.Wait(); err != nil {
		return 0, err
	}
	t.mu.Lock()
	for key, n := range latest {
		if n > t.written[key] {
			t.sum += n - t.written[key]
			t.written[key] = n
		}
	}
	t.mu.Unlock()
	return len(latest), nil
}

// put sets key's count to n unless the table holds n or more already.
func (t *countTable) put(ctx context.Context, key string, n int64) error {
	_, err := t.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &t.name,
		Key:                       map[string]types.AttributeValue{"key": &types.AttributeValueMemberS{Value: key}},
		UpdateExpression:          aws.String("SET #c = :c"),
		ConditionExpression:       aws.String("attribute_not_exists(#c) OR #c < :c"),
		ExpressionAttributeNames:  map[string]string{"#c": "count"}, // COUNT is a reserved word
		ExpressionAttributeValues: map[string]types.AttributeValue{":c": &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}},
	})
	var stale *types.ConditionalCheckFailedException
	if errors.As(err, &stale) {
		return nil // the table has this count or a greater one: a replay
	}
	if err != nil {
		return fmt.Errorf("write the count of a key to %s: %w", t.name, err)
	}
	return nil
}

// total returns the sum of the counts this worker wrote.
func (t *countTable) total() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sum
}

// keyCount is one item of the table.
type keyCount struct {
	Key   string
	Count int64
}

// scan returns every item of the table, sorted by key.
func (t *countTable) scan(ctx context.Context) ([]keyCount, error) {
	var all []keyCount
	p := dynamodb.NewScanPaginator(t.db, &dynamodb.ScanInput{TableName: &t.name, ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("scan %s: %w", t.name, err)
		}
		for _, item := range page.Items {
			k, _ := item["key"].(*types.AttributeValueMemberS)
			c, _ := item["count"].(*types.AttributeValueMemberN)
			if k == nil || c == nil {
				return nil, fmt.Errorf("scan %s: an item without a string key or a number count: not a table of this program's", t.name)
			}
			n, err := strconv.ParseInt(c.Value, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("scan %s: key %q: count %q: %w", t.name, k.Value, c.Value, err)
			}
			all = append(all, keyCount{Key: k.Value, Count: n})
		}
	}
	slices.SortFunc(all, func(a, b keyCount) int { return cmp.Compare(a.Key, b.Key) })
	return all, nil
}
