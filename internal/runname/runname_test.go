package runname_test

import (
	"context"
	"testing"

	"github.com/weirstream/weir/internal/runname"
)

type other struct{}

// A context carries the name With gave it, each With a new one, and a
// context that was given none carries "".
func TestWith(t *testing.T) {
	if n := runname.Of(context.Background()); n != "" {
		t.Errorf("Of(Background) = %q, want \"\"", n)
	}
	a, b := runname.With(context.Background()), runname.With(context.Background())
	na, nb := runname.Of(a), runname.Of(b)
	if len(na) != runname.Len || len(nb) != runname.Len || na == nb {
		t.Errorf("names %q and %q: want two different names of %d characters", na, nb, runname.Len)
	}
	if n := runname.Of(context.WithValue(a, other{}, 1)); n != na {
		t.Errorf("Of(a child of a) = %q, want %q", n, na)
	}
}

// TestWithEnd checks that Ended gives the Run's end from a context derived
// from it that ends sooner.
func TestWithEnd(t *testing.T) {
	if c := runname.Ended(context.Background()); c != nil {
		t.Error("Ended(Background) is not nil")
	}
	run, end := context.WithCancel(runname.With(context.Background()))
	run = runname.WithEnd(run)
	call, cancel := context.WithCancel(run)
	cancel()
	ended := runname.Ended(call)
	select {
	case <-ended:
		t.Fatal("the Run's end is closed when a call's context ended")
	default:
	}
	end()
	<-ended
}
