package kinesis_test

import (
	"fmt"
	"time"

	"github.com/weirstream/weir/checkpoint/leasetable"

	"github.com/weirstream/weir/source/kinesis"
)

// New refuses a bad configuration before anything starts, naming every
// field at fault and the fix.
func ExampleNew() {
	_, err := kinesis.New(kinesis.Config{Stream: "words", RecordsPerRead: 20000, PollInterval: -time.Second})
	fmt.Println(err)
	// Output:
	// kinesis: invalid config: App "": must name the application, for example "wordcount"
	// RecordsPerRead 20000: must be 1 to 10000 (0 means 10000)
	// PollInterval -1s: must be > 0 (0 means 500ms)
}

// Several workers share a stream through a lease table: each runs this
// with the same table and reads the shards it holds leases on, and
// checkpoints them every second (by default, every batch interval). Bad lease settings are refused by New,
// with every other problem.
func Example_leases() {
	_, err := kinesis.New(kinesis.Config{Stream: "words", App: "word count", Leases: &leasetable.Config{LeaseDuration: time.Second, RenewInterval: 2 * time.Second, CheckpointInterval: -time.Second}})
	fmt.Println(err)

	r, err := kinesis.New(kinesis.Config{Stream: "words", App: "wordcount", Leases: &leasetable.Config{WorkerID: "host-a", CheckpointInterval: time.Second}})
	fmt.Println(r.WorkerID(), err)
	// Output:
	// kinesis: invalid config: Leases.TableName is empty, so it defaults to App "word count", which is not a valid table name (table name "word count": byte 4 (' ') not allowed, use only a-z A-Z 0-9 _ . -): set Leases.TableName
	// Leases.CheckpointInterval -1s: must be > 0 (0 means the default, 1m0s)
	// Leases.RenewInterval 2s: must be shorter than LeaseDuration 1s, or the lease expires between two renewals (LeaseDuration/3 is usual)
	// host-a <nil>
}
