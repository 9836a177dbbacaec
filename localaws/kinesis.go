package localaws

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/weirstream/weir/internal/backoff"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/weirstream/weir/clock"
)

// Limits of one PutRecords call, and how hard PutRecordsOn tries.
const (
	putMaxRecords = 500
	putMaxBytes   = 5 << 20
	putAttempts   = 20
	activeTimeout = 60 * time.Second
)

// CreateStream creates a provisioned stream with shards shards on kinesalite
// and waits until it is ACTIVE.
func (e *Env) CreateStream(ctx context.Context, name string, shards int) error {
	return CreateStreamOn(ctx, e.Kinesis(), name, shards)
}

// PutRecords puts records on stream on kinesalite; see PutRecordsOn.
func (e *Env) PutRecords(ctx context.Context, stream string, records [][]byte, partitionKey func(i int) string) error {
	return PutRecordsOn(ctx, e.Kinesis(), stream, records, partitionKey)
}

// CreateStreamOn creates a provisioned stream with shards shards through c
// (for example a client of kinesis-mock, or one with injected faults) and
// waits until it is ACTIVE, for at most a minute.
func CreateStreamOn(ctx context.Context, c *kinesis.Client, name string, shards int) error {
	if shards < 1 {
		return fmt.Errorf("localaws: create stream %q: shards %d: must be >= 1", name, shards)
	}
	_, err := c.CreateStream(ctx, &kinesis.CreateStreamInput{
		StreamName: aws.String(name),
		ShardCount: aws.Int32(int32(shards)),
	})
	if err != nil {
		return fmt.Errorf("localaws: create stream %q: %w", name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, activeTimeout)
	defer cancel()
	for delay := time.Millisecond; ; delay = min(2*delay, 100*time.Millisecond) {
		out, err := c.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(name)})
		if err != nil {
			return fmt.Errorf("localaws: wait for stream %q: %w", name, err)
		}
		if out.StreamDescriptionSummary.StreamStatus == types.StreamStatusActive {
			return nil
		}
		if err := clock.Sleep(ctx, clock.Real{}, delay); err != nil {
			return fmt.Errorf("localaws: wait for stream %q to become ACTIVE: %w", name, err)
		}
	}
}

// PutRecordsOn puts records on stream through c, in calls of at most 500
// records and 5 MiB, retrying the entries a call reports as failed (up to 20
// times, with back-off). Record i gets partition key partitionKey(i); a nil
// partitionKey uses strconv.Itoa(i). Records of one shard keep their order
// unless some failed and were retried.
func PutRecordsOn(ctx context.Context, c *kinesis.Client, stream string, records [][]byte, partitionKey func(i int) string) error {
	if partitionKey == nil {
		partitionKey = strconv.Itoa
	}
	entries := make([]types.PutRecordsRequestEntry, len(records))
	for i, data := range records {
		key := partitionKey(i)
		if key == "" || len(key) > 256 {
			return fmt.Errorf("localaws: put on %q: partition key %q of record %d: want 1 to 256 characters", stream, key, i)
		}
		entries[i] = types.PutRecordsRequestEntry{Data: data, PartitionKey: aws.String(key)}
	}
	for len(entries) > 0 {
		n, size := 0, 0
		for n < len(entries) && n < putMaxRecords {
			size += len(entries[n].Data) + len(*entries[n].PartitionKey)
			if n > 0 && size > putMaxBytes {
				break
			}
			n++
		}
		if err := putBatch(ctx, c, stream, entries[:n]); err != nil {
			return err
		}
		entries = entries[n:]
	}
	return nil
}

// putBatch puts entries in one call and retries the failed ones.
func putBatch(ctx context.Context, c *kinesis.Client, stream string, entries []types.PutRecordsRequestEntry) error {
	wait := backoff.Policy{Base: 5 * time.Millisecond, Max: 500 * time.Millisecond}.Start()
	for attempt := 1; ; attempt++ {
		out, err := c.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: entries})
		if err != nil {
			return fmt.Errorf("localaws: put %d records on %q: %w", len(entries), stream, err)
		}
		var failed []types.PutRecordsRequestEntry
		var firstErr error
		for i, r := range out.Records {
			if r.ErrorCode != nil {
				failed = append(failed, entries[i])
				if firstErr == nil {
					firstErr = fmt.Errorf("%s: %s", aws.ToString(r.ErrorCode), aws.ToString(r.ErrorMessage))
				}
			}
		}
		if len(failed) == 0 {
			return nil
		}
		if attempt == putAttempts {
			return fmt.Errorf("localaws: put on %q: %d records still failing after %d attempts: %w",
				stream, len(failed), attempt, firstErr)
		}
		if err := wait.Wait(ctx, clock.Real{}); err != nil {
			return errors.Join(fmt.Errorf("localaws: put on %q: %w", stream, err), firstErr)
		}
		entries = failed
	}
}
