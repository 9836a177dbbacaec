package clock_test

import (
	"context"
	"fmt"
	"time"

	"github.com/weirstream/weir/clock"
)

// A Manual clock moves only when told, so a test of code that waits
// ("retries after 10s") takes no time and cannot flake: the test waits
// until the code is blocked on the clock, then moves it.
func ExampleManual() {
	ctx := context.Background()
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	c := clock.NewManual(start)

	slept := make(chan error)
	go func() { slept <- clock.Sleep(ctx, c, 10*time.Second) }() // the code under test

	if err := c.WaitForWaiters(ctx, 1); err != nil { // it is asleep now
		fmt.Println(err)
		return
	}
	c.Advance(10 * time.Second)
	fmt.Println(<-slept, c.Now().Sub(start))
	// Output:
	// <nil> 10s
}
