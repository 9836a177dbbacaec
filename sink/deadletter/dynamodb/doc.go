// Package dynamodb keeps the records a pipeline's outputs quarantine
// (stream.Quarantine) in a DynamoDB table, one item per letter, written
// through the exactly-once DynamoDB sink (package sink/dynamodb):
//
//	dead, err := dynamodb.New(ctx, sinkddb.Config{Table: "dead-letters"})
//	stream.ForEach(events, send, stream.Quarantine(dead))
//
// The table, which must exist, has the partition key "batch" (a string)
// and the sort key "index" (a number). A letter's item is keyed by its
// source record (the shard, position and output), or by its batch, output,
// a fingerprint of its record and, without a recovery log, Run or, on a
// fleet, worker, so that the workers of a fleet never write each other's
// letters, nor a Run without a log (whose batch times may repeat) an
// earlier Run's, nor a recomputed batch that failed other records the
// first attempt's. The keys name no pipeline: a table holds one
// pipeline's letters. See Table for the items and DESIGN.md's Failure
// model in the repository for what is quarantined.
package dynamodb
