package streak

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/smithy-go"
)

// TestKinds checks Kinds' runs: one per kind of failure, a key failing by
// turns with two kinds in both until it succeeds (two warnings, not one
// per try), and a run's end when its last key succeeds or is let go.
func TestKinds(t *testing.T) {
	at := time.Unix(0, 0)
	throttled := &smithy.GenericAPIError{Code: "ProvisionedThroughputExceededException"}
	refused := fmt.Errorf("commit: %w", &smithy.GenericAPIError{Code: "ConditionalCheckFailedException"})
	var k Kinds
	firsts := 0
	fail := func(key string, err error) {
		if _, first, _ := k.Failed(key, err, at); first {
			firsts++
		}
	}
	fail("a", refused)
	for range 3 {
		fail("b", throttled)
		fail("b", errors.New("connection reset"))
		fail("c", throttled)
	}
	if firsts != 3 {
		t.Errorf("three kinds of failure: %d runs started, want 3", firsts)
	}
	if over, was := k.Ended("b"); !was || len(over) != 1 || over["other"].IsZero() {
		t.Errorf("b succeeded: runs ended %v, was failing %v; want other's, true", over, was)
	}
	if over, _ := k.Ended("c"); len(over) != 1 || !over["ProvisionedThroughputExceededException"].Equal(at) {
		t.Errorf("c let go: runs ended %v; want the throttling's", over)
	}
	if !k.Failing("a") || k.Failing("b") {
		t.Errorf("Failing: a %v, b %v; want true, false", k.Failing("a"), k.Failing("b"))
	}
	if _, first, n := k.Failed("b", throttled, at); !first || n != 1 {
		t.Errorf("a new throttling after the last ended: first %v, failing %d; want true, 1", first, n)
	}
}
