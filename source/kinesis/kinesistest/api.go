package kinesistest

import (
	"context"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/weirstream/weir/batch"
)

// Limits of the API calls, as Kinesis documents them.
const (
	// MaxLimit is the largest GetRecords Limit, and its default.
	MaxLimit = 10000
	// MaxListResults is the largest ListShards MaxResults.
	MaxListResults = 10000
	// DefaultListResults is the ListShards page size when MaxResults is unset.
	DefaultListResults = 1000
	// retentionHours is the stream's reported retention period.
	retentionHours = 24
)

// enter starts an API call: it fails for a done ctx, counts the call and
// applies injected throttling. On success f.mu is held and the caller must
// unlock it.
func (f *Fake) enter(ctx context.Context, op string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f.mu.Lock()
	f.calls[op]++
	if f.throttle[op] > 0 {
		f.throttle[op]--
		f.mu.Unlock()
		return throttled(op)
	}
	return nil
}

// streamOf finds the stream a request names by StreamName or StreamARN.
// f.mu is held.
func (f *Fake) streamOf(name, arn *string) (*fstream, error) {
	switch {
	case name == nil && arn == nil:
		return nil, invalidArgument("Either StreamName or StreamARN should be provided.")
	case arn != nil:
		s, err := f.stream(*arn)
		if err != nil || s.arn != *arn {
			return nil, notFound("Stream %s under account %s not found.", *arn, Account)
		}
		if name != nil && *name != s.name {
			return nil, invalidArgument("StreamARN %s and StreamName %s name different streams", *arn, *name)
		}
		return s, nil
	}
	s, ok := f.streams[*name]
	if !ok {
		return nil, notFound("Stream %s under account %s not found.", *name, Account)
	}
	return s, nil
}

// DescribeStreamSummary describes a stream (ACTIVE, provisioned, 24 hours
// of retention) or returns *types.ResourceNotFoundException.
func (f *Fake) DescribeStreamSummary(ctx context.Context, in *awskinesis.DescribeStreamSummaryInput, _ ...func(*awskinesis.Options)) (*awskinesis.DescribeStreamSummaryOutput, error) {
	if in == nil {
		in = &awskinesis.DescribeStreamSummaryInput{}
	}
	if err := f.enter(ctx, OpDescribeStreamSummary); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	s, err := f.streamOf(in.StreamName, in.StreamARN)
	if err != nil {
		return nil, err
	}
	open := 0
	for _, sh := range s.shards {
		if sh.endSeq == "" {
			open++
		}
	}
	return &awskinesis.DescribeStreamSummaryOutput{StreamDescriptionSummary: &types.StreamDescriptionSummary{
		StreamName:              aws.String(s.name),
		StreamARN:               aws.String(s.arn),
		StreamStatus:            types.StreamStatusActive,
		StreamModeDetails:       &types.StreamModeDetails{StreamMode: types.StreamModeProvisioned},
		RetentionPeriodHours:    aws.Int32(retentionHours),
		StreamCreationTimestamp: aws.Time(s.created),
		EnhancedMonitoring:      []types.EnhancedMetrics{{}},
		EncryptionType:          types.EncryptionTypeNone,
		OpenShardCount:          aws.Int32(int32(open)),
		ConsumerCount:           aws.Int32(0),
	}}, nil
}

// ListShards lists a stream's shards in shard ID order, closed ones
// included, MaxResults (default 1000) per page, with a NextToken valid for
// NextTokenTTL while more remain. ExclusiveStartShardId is honoured;
// ShardFilter is not supported (InvalidArgumentException).
func (f *Fake) ListShards(ctx context.Context, in *awskinesis.ListShardsInput, _ ...func(*awskinesis.Options)) (*awskinesis.ListShardsOutput, error) {
	if in == nil {
		in = &awskinesis.ListShardsInput{}
	}
	if err := f.enter(ctx, OpListShards); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	limit := DefaultListResults
	if in.MaxResults != nil {
		limit = int(*in.MaxResults)
		if limit < 1 || limit > MaxListResults {
			return nil, validation("1 validation error detected: Value '%d' at 'maxResults' failed to satisfy constraint: Member must have value between 1 and %d", limit, MaxListResults)
		}
	}
	if in.ShardFilter != nil {
		return nil, invalidArgument("kinesistest: ListShards ShardFilter is not supported by the fake")
	}
	s, start, err := f.listStart(in)
	if err != nil {
		return nil, err
	}
	end := min(start+limit, len(s.shards))
	out := &awskinesis.ListShardsOutput{Shards: make([]types.Shard, 0, end-start)}
	for _, sh := range s.shards[start:end] {
		out.Shards = append(out.Shards, sh.describe())
	}
	if end < len(s.shards) {
		out.NextToken = aws.String(token{stream: s.name, next: end, issued: f.clock.Now(), max: limit}.encode())
	}
	return out, nil
}

// listStart returns the stream a ListShards call lists and the index of its
// first shard on this page. f.mu is held.
func (f *Fake) listStart(in *awskinesis.ListShardsInput) (*fstream, int, error) {
	if in.NextToken != nil {
		if in.StreamName != nil || in.StreamARN != nil || in.ExclusiveStartShardId != nil {
			return nil, 0, invalidArgument("NextToken and StreamName, StreamARN or ExclusiveStartShardId cannot be provided together.")
		}
		t, err := decodeToken(*in.NextToken)
		if err != nil {
			return nil, 0, err
		}
		if f.clock.Now().Sub(t.issued) > NextTokenTTL {
			return nil, 0, &types.ExpiredNextTokenException{Message: aws.String("The NextToken has expired")}
		}
		s, ok := f.streams[t.stream]
		if !ok {
			return nil, 0, notFound("Stream %s under account %s not found.", t.stream, Account)
		}
		return s, min(t.next, len(s.shards)), nil
	}
	s, err := f.streamOf(in.StreamName, in.StreamARN)
	if err != nil {
		return nil, 0, err
	}
	start := 0
	if after := aws.ToString(in.ExclusiveStartShardId); after != "" {
		for start < len(s.shards) && s.shards[start].id <= after {
			start++
		}
	}
	return s, start, nil
}

// GetShardIterator returns an iterator, valid for IteratorTTL, at the
// position the request names: TRIM_HORIZON (the oldest record kept),
// LATEST (after the newest), AT_ or AFTER_SEQUENCE_NUMBER (of this shard,
// else InvalidArgumentException; a trimmed number starts at the oldest
// record kept) or AT_TIMESTAMP (the first record arrived at or after it).
func (f *Fake) GetShardIterator(ctx context.Context, in *awskinesis.GetShardIteratorInput, _ ...func(*awskinesis.Options)) (*awskinesis.GetShardIteratorOutput, error) {
	if in == nil {
		in = &awskinesis.GetShardIteratorInput{}
	}
	if err := f.enter(ctx, OpGetShardIterator); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	s, err := f.streamOf(in.StreamName, in.StreamARN)
	if err != nil {
		return nil, err
	}
	if in.ShardId == nil {
		return nil, validation("1 validation error detected: Value null at 'shardId' failed to satisfy constraint: Member must not be null")
	}
	sh, err := s.shard(*in.ShardId)
	if err != nil {
		return nil, err
	}
	pos, err := sh.position(in)
	if err != nil {
		return nil, err
	}
	it := iterator{stream: s.name, shard: sh.id, pos: pos, issued: f.clock.Now(), gen: f.gen}
	return &awskinesis.GetShardIteratorOutput{ShardIterator: aws.String(it.encode())}, nil
}

// position returns the index of the first record an iterator of in reads.
func (sh *fshard) position(in *awskinesis.GetShardIteratorInput) (int, error) {
	switch in.ShardIteratorType {
	case types.ShardIteratorTypeTrimHorizon:
		return sh.trimmedTo, nil
	case types.ShardIteratorTypeLatest:
		return len(sh.records), nil
	case types.ShardIteratorTypeAtSequenceNumber, types.ShardIteratorTypeAfterSequenceNumber:
		seq := aws.ToString(in.StartingSequenceNumber)
		if in.StartingSequenceNumber == nil {
			return 0, invalidArgument("Must specify StartingSequenceNumber for ShardIteratorType %s", in.ShardIteratorType)
		}
		if _, index, err := parseSeq(seq); err != nil {
			return 0, err
		} else if index != sh.index {
			return 0, invalidArgument("Invalid StartingSequenceNumber. It encodes shard index %d, while it was used in a call to a shard with %s", index, sh.id)
		}
		if in.ShardIteratorType == types.ShardIteratorTypeAtSequenceNumber {
			return sh.search(func(r frecord) bool { return batch.CompareSeq(r.seq, seq) >= 0 }), nil
		}
		return sh.search(func(r frecord) bool { return batch.CompareSeq(r.seq, seq) > 0 }), nil
	case types.ShardIteratorTypeAtTimestamp:
		if in.Timestamp == nil {
			return 0, invalidArgument("Must specify timestampInMillis parameter for iterator of type AT_TIMESTAMP")
		}
		t := *in.Timestamp
		return sh.search(func(r frecord) bool { return !r.arrival.Before(t) }), nil
	}
	return 0, validation("1 validation error detected: Value '%s' at 'shardIteratorType' failed to satisfy constraint: Member must satisfy enum value set: [AFTER_SEQUENCE_NUMBER, LATEST, AT_TIMESTAMP, TRIM_HORIZON, AT_SEQUENCE_NUMBER]", in.ShardIteratorType)
}

// GetRecords returns up to Limit (1..10000, default 10000) records from an
// iterator, the next iterator (nil, with ChildShards, from a call that
// starts at the end of a closed shard: as on kinesalite, the call that
// returns a closed shard's last records still gives a next iterator, whose
// call then returns none and ends the shard), and MillisBehindLatest: how long ago, on the
// fake's clock, the next unread record arrived (0 when none is left). An
// iterator that is not the fake's fails with
// *types.InvalidArgumentException, one older than IteratorTTL or issued
// before ExpireIterators with *types.ExpiredIteratorException.
func (f *Fake) GetRecords(ctx context.Context, in *awskinesis.GetRecordsInput, _ ...func(*awskinesis.Options)) (*awskinesis.GetRecordsOutput, error) {
	if in == nil {
		in = &awskinesis.GetRecordsInput{}
	}
	if err := f.enter(ctx, OpGetRecords); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	limit := MaxLimit
	if in.Limit != nil {
		limit = int(*in.Limit)
		if limit < 1 || limit > MaxLimit {
			return nil, validation("1 validation error detected: Value '%d' at 'limit' failed to satisfy constraint: Member must have value between 1 and %d", limit, MaxLimit)
		}
	}
	if in.ShardIterator == nil {
		return nil, validation("1 validation error detected: Value null at 'shardIterator' failed to satisfy constraint: Member must not be null")
	}
	it, err := decodeIterator(*in.ShardIterator)
	if err != nil {
		return nil, err
	}
	s, ok := f.streams[it.stream]
	if !ok || (in.StreamARN != nil && *in.StreamARN != s.arn) {
		return nil, notFound("Stream %s under account %s not found.", it.stream, Account)
	}
	sh, err := s.shard(it.shard)
	if err != nil {
		return nil, err
	}
	now := f.clock.Now()
	if it.gen < f.minGen || now.Sub(it.issued) > IteratorTTL {
		return nil, &types.ExpiredIteratorException{Message: aws.String("Iterator expired. The iterator was created at time " + it.issued.UTC().Format("Mon Jan 02 15:04:05 UTC 2006") + " while right now it is " + now.UTC().Format("Mon Jan 02 15:04:05 UTC 2006") + " which is further in the future than the tolerated delay of 300000 milliseconds.")}
	}
	return f.read(s, sh, it, limit, now), nil
}

// read serves a valid GetRecords call. f.mu is held.
func (f *Fake) read(s *fstream, sh *fshard, it iterator, limit int, now time.Time) *awskinesis.GetRecordsOutput {
	start := min(max(it.pos, sh.trimmedTo), len(sh.records))
	end := min(start+limit, len(sh.records))
	out := &awskinesis.GetRecordsOutput{Records: make([]types.Record, 0, end-start), MillisBehindLatest: aws.Int64(0)}
	for _, r := range sh.records[start:end] {
		out.Records = append(out.Records, types.Record{
			SequenceNumber:              aws.String(r.seq),
			PartitionKey:                aws.String(r.key),
			Data:                        slices.Clone(r.data),
			ApproximateArrivalTimestamp: aws.Time(r.arrival),
		})
	}
	if end < len(sh.records) {
		out.MillisBehindLatest = aws.Int64(max(now.Sub(sh.records[end].arrival).Milliseconds(), 0))
	}
	if sh.endSeq != "" && start == len(sh.records) {
		out.ChildShards = s.children(sh.id)
		return out
	}
	next := iterator{stream: s.name, shard: sh.id, pos: end, issued: now, gen: f.gen}
	out.NextShardIterator = aws.String(next.encode())
	return out
}

// children returns the shards made from shard id, as GetRecords reports
// them at the end of a closed shard.
func (s *fstream) children(id string) []types.ChildShard {
	var out []types.ChildShard
	for _, sh := range s.shards {
		if sh.parent != id && sh.adjacent != id {
			continue
		}
		parents := []string{sh.parent}
		if sh.adjacent != "" {
			parents = append(parents, sh.adjacent)
		}
		d := sh.describe()
		out = append(out, types.ChildShard{ShardId: aws.String(sh.id), ParentShards: parents, HashKeyRange: d.HashKeyRange})
	}
	return out
}
