// Package kinesis is a weir sink that writes each batch to a Kinesis data
// stream with PutRecords, a partition key per record:
//
//	sink, err := kinesis.New(kinesis.Config[Event]{
//		Client: awskinesis.NewFromConfig(awsCfg),
//		Stream: "events-out",
//		Record: func(e Event) (string, []byte) { return e.User, e.JSON() },
//	})
//	stream.ForEachBatch(events, sink.Write, stream.Named("kinesis"))
//
// Write returns once every record of the batch is written. Records of one
// partition key are written in the order of the batch: a PutRecords call
// holds at most one record per key, and a record that failed (throttled,
// an internal failure) is written before any later record of its key.
// Records a PutRecords result says failed with a code time heals
// (ProvisionedThroughputExceededException, InternalFailure,
// KMSThrottlingException) are retried with back-off until written; one
// failed with the stream's refusal (its KMS key's, IAM's, the stream gone)
// fails Write at once, marked as no retry fixes, and one of any other code
// fails it for the output's retries. A record Kinesis would refuse fails
// the batch before anything is sent, or, with stream.Quarantine, is set
// aside while the others are written.
//
// A batch that a crash interrupted runs again after the restart (with a
// recovery log: same time, same records, same order), so the records it
// wrote before the crash are written twice. With Config.Origin set, every
// record carries an origin tag (writer, batch time, index in the batch) in
// front of its data, by which a weir pipeline reading the stream drops the
// copies; the reading side is described in the repository's DESIGN.md
// ("Writing to Kinesis"). Without it the records are written as they are:
// at least once. On a fleet (a source sharing its shards with other
// workers), the writer in a tag also names the worker (Config.Worker, or a
// random name), so that two workers' records never share a tag; without a
// recovery log, whose batch times may repeat an earlier Run's, it names
// the pipeline's Run.
//
// With Config.Aggregate, the records of one key that would otherwise wait
// for calls of their own are packed into KPL aggregates (one Kinesis record
// each, written or failed as a whole), which the Kinesis Client Library and
// weir's Kinesis receiver split again.
package kinesis
