// Package kinesis sends the records a pipeline's outputs quarantine
// (stream.Quarantine) to a Kinesis stream, one record per letter (its
// JSON), written through the Kinesis sink of package sink/kinesis with
// origin tags:
//
//	dead, err := kinesis.New(sinkkinesis.Config[stream.DeadLetter]{
//		Client: awskinesis.NewFromConfig(awsCfg), Stream: "dead-letters", Origin: "orders",
//	})
//	stream.ForEach(events, send, stream.Quarantine(dead))
//
// See Stream for the records and DESIGN.md's Failure model in the
// repository for what is quarantined.
package kinesis
