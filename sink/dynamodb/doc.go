// Package dynamodb is an exactly-once DynamoDB sink for weir pipelines: a
// function the user gives maps each record to a write of one item (a put of
// the whole item, or an update expression such as "ADD hits :one"), and the
// Sink makes every write conditional on a version it derives from the
// record's position in its source shard or its place in its batch, so that
// a batch run again after a crash (with a recovery log, see
// stream.Config.Recovery) applies none of its writes twice and never moves
// an item backwards:
//
//	sink, err := dynamodb.New(ctx, dynamodb.Config{Table: "counts"}, func(w Word) (dynamodb.Write, error) {
//		return dynamodb.Write{
//			Key:    map[string]types.AttributeValue{"word": &types.AttributeValueMemberS{Value: w.Text}},
//			Update: "ADD hits :one",
//			Values: map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}},
//		}, nil
//	})
//	stream.ForEachBatch(words, sink.Write, stream.Named("counts"))
//
// The version of a write is its record's origin when the batch has
// origins (the output declared with stream.Origins, downstream of a
// Kinesis source through narrow operators): the record's shard and
// position, which order a shard's records whichever worker of a fleet
// writes them, and the shard's ancestors (parents, grandparents, ...), as
// its lease and the shard list name them, so that an ancestor's write
// after a reshard's descendant wrote the item is skipped.
// Otherwise it is the batch's time and the write's ordinal
// among the batch's writes of the same item, which order one worker's
// batches only: on a pipeline whose source shares its shards with other
// workers, Write refuses such a batch unless
// Config.AllowBatchTimeVersions. The item keeps the version of the last
// write applied, and a write whose version is not greater is skipped and
// counted (Stats), not an error. The repository's DESIGN.md ("Exactly-once
// outputs") explains the scheme, the order rule and its limits.
//
// Batch-time versions need a recovery log: without one, nothing remembers
// a Run's batch times, and a restart whose wall clock is behind the last
// Run's batches gives its batches those times again, so their writes
// without origins are skipped as already applied, and lost. Keep a
// recovery log, or write records with origins.
//
// New waits for a table not yet ACTIVE or UPDATING for as long as its ctx
// allows, not for a fixed time as for weir's own tables: the table is the
// user's, and one being restored from a backup or to a point in time is
// CREATING for 20 minutes to hours. The wait is logged at WARN after 30 s
// and again every 5 minutes, naming the table and its status; bound it
// with New's ctx.
package dynamodb
