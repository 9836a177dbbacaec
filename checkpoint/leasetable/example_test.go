package leasetable_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/source/kinesis"
)

// Every worker of an application runs a Kinesis receiver with the same
// lease settings: they share the stream's shards through the lease table
// (named after App unless TableName says otherwise) and checkpoint every
// CheckpointInterval. StateDir lets a worker restarted after a crash take
// its predecessor's leases back at once. Bad settings are refused by
// kinesis.New, naming each field.
func ExampleConfig() {
	r, err := kinesis.New(kinesis.Config{Stream: "words", App: "wordcount", Leases: &leasetable.Config{
		WorkerID:           "host-a",
		StateDir:           "/var/lib/wordcount/leases",
		CheckpointInterval: 30 * time.Second,
	}})
	fmt.Println(r.WorkerID(), err)

	_, err = kinesis.New(kinesis.Config{Stream: "words", App: "wordcount", Leases: &leasetable.Config{
		LeaseDuration: time.Second, AttemptTimeout: 2 * time.Second,
	}})
	fmt.Println(errors.Is(err, kinesis.ErrInvalidConfig))
	fmt.Println(err)
	// Output:
	// host-a <nil>
	// true
	// kinesis: invalid config: Leases.AttemptTimeout 2s: must be shorter than LeaseDuration 1s, or a renewal could outlast its lease (LeaseDuration/5 is usual)
}
