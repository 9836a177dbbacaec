package clock_test

import (
	"fmt"
	"time"

	"github.com/weirstream/weir/clock"
)

// A Manual clock moves only when told: a timer fires once the clock passes
// its deadline, so a test of "fires after 10s" takes no time and cannot
// flake. Components take it as their Config.Clock.
func ExampleManual() {
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	c := clock.NewManual(start)
	t := c.NewTimer(10 * time.Second)

	c.Advance(9 * time.Second)
	select {
	case <-t.C():
		fmt.Println("fired early")
	default:
		fmt.Println("not yet at", c.Now().Sub(start))
	}

	c.Advance(time.Second)
	fmt.Println("fired at", (<-t.C()).Sub(start))
	// Output:
	// not yet at 9s
	// fired at 10s
}
