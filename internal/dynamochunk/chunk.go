package dynamochunk

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/backoff"
)

// Size is the number of value bytes one chunk item holds. An item holds at
// most 400 KB (DynamoDB's KB is 1024 bytes), counting its attribute names
// and values (binary values by their raw length); the rest of a chunk item
// is its key (a partition key of at most 2048 bytes, DynamoDB's limit, which
// internal/shardstate's generation names come close to) and short names.
const Size = 300 << 10

// Split cuts data into chunks of Size bytes (the last one shorter), sharing
// data's memory. Empty data has no chunks.
func Split(data []byte) [][]byte {
	chunks := make([][]byte, 0, (len(data)+Size-1)/Size)
	for off := 0; off < len(data); off += Size {
		chunks = append(chunks, data[off:min(off+Size, len(data))])
	}
	return chunks
}

// Join returns the concatenation of the binary attribute data of items,
// which must be the chunks numbered 1 to len(items), in order, by their
// number attribute seq. On error, bad is the number (seq) of the offending
// chunk.
func Join(items []map[string]types.AttributeValue, seq, data string) (joined []byte, bad int64, err error) {
	size := 0
	for _, it := range items {
		if b, ok := it[data].(*types.AttributeValueMemberB); ok {
			size += len(b.Value)
		}
	}
	joined = make([]byte, 0, size)
	for i, it := range items {
		want := int64(i + 1)
		n, ok := it[seq].(*types.AttributeValueMemberN)
		b, isB := it[data].(*types.AttributeValueMemberB)
		if !ok || n.Value != strconv.FormatInt(want, 10) || !isB {
			return nil, want, fmt.Errorf("item %d is not chunk %d", i+1, want)
		}
		joined = append(joined, b.Value...)
	}
	return joined, 0, nil
}

// BatchWriter is the part of *dynamodb.Client BatchWrite uses.
type BatchWriter interface {
	BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error)
}

// unprocessedWait paces the retries of BatchWriteItem's unprocessed items
// (DynamoDB's advice: back off exponentially).
var unprocessedWait = backoff.Policy{Base: 50 * time.Millisecond, Max: 2 * time.Second}

// BatchWrite makes up to 25 writes of table in one BatchWriteItem,
// retrying the unprocessed ones with back-off on clk, 9 attempts in all;
// writes still unprocessed then fail it with an error naming the table's
// write capacity and the fix.
func BatchWrite(ctx context.Context, c BatchWriter, clk clock.Clock, table string, reqs []types.WriteRequest) error {
	items := map[string][]types.WriteRequest{table: reqs}
	wait := unprocessedWait.Start()
	for attempt := 0; ; attempt++ {
		out, err := c.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: items})
		if err != nil {
			return err
		}
		if len(out.UnprocessedItems[table]) == 0 {
			return nil
		}
		if attempt == 8 {
			// DynamoDB leaves writes unprocessed when they exceed the
			// table's write capacity (or on an internal failure).
			return fmt.Errorf("table %s: %d writes still unprocessed after %d BatchWriteItem attempts: the table's write capacity is exceeded; "+
				"fix: raise its provisioned write capacity (or its auto scaling maximum), or switch it to on-demand billing (%s)",
				table, len(out.UnprocessedItems[table]), attempt+1, types.BillingModePayPerRequest)
		}
		items = out.UnprocessedItems
		if err := wait.Wait(ctx, clk); err != nil {
			return err
		}
	}
}

// DeleteKeys deletes the items of table with keys, 25 to a BatchWrite.
func DeleteKeys(ctx context.Context, c BatchWriter, clk clock.Clock, table string, keys []map[string]types.AttributeValue) error {
	for len(keys) > 0 {
		n := min(len(keys), 25)
		reqs := make([]types.WriteRequest, n)
		for i, k := range keys[:n] {
			reqs[i] = types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: k}}
		}
		if err := BatchWrite(ctx, c, clk, table, reqs); err != nil {
			return err
		}
		keys = keys[n:]
	}
	return nil
}
