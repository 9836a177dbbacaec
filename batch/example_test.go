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
