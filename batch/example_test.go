package batch_test

import (
	"fmt"
	"time"

	"github.com/weirstream/weir/batch"
)

// Kinesis sequence numbers are decimal strings too long for an integer:
// compare them as numbers, never as strings.
func ExampleCompareSeq() {
	a, b := "9", "10"
	fmt.Println(a < b, batch.CompareSeq(a, b))
	fmt.Println(batch.MaxSeq("49590338271490256608559692538361571095921575989136588898", ""))
	// Output:
	// false -1
	// 49590338271490256608559692538361571095921575989136588898
}

// A batch time is a number of milliseconds since the Unix epoch, the
// identity of a batch across restarts.
func ExampleTime() {
	t := batch.TimeOf(time.Date(2023, 11, 14, 22, 13, 20, 0, time.UTC))
	fmt.Println(t)
	fmt.Println(t.Add(time.Second).Sub(t))
	// Output:
	// 1700000000000 ms (2023-11-14T22:13:20Z)
	// 1s
}

// A function writing a batch leaves out the records it cannot write and
// writes the others with their origins, which still match them.
func ExampleBatch_Keep() {
	b := batch.New(batch.TimeOf(time.Unix(1700000000, 0)), nil, []string{"a", "", "b"}, []string{"c"}).
		WithOrigins([]batch.Origin{
			{Stream: "s", Shard: "shardId-0", Seq: "1"}, {Stream: "s", Shard: "shardId-0", Seq: "2"},
			{Stream: "s", Shard: "shardId-0", Seq: "3"}, {Stream: "s", Shard: "shardId-1", Seq: "7"},
		})
	writable := b.Keep(func(_ int, v string) bool { return v != "" })
	for i, v := range writable.Records() {
		o := writable.Origins()[i]
		fmt.Println(v, o.Shard, o.Seq)
	}
	// Output:
	// a shardId-0 1
	// b shardId-0 3
	// c shardId-1 7
}
