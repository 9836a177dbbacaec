package outputid_test

import (
	"context"
	"testing"

	"github.com/weirstream/weir/internal/outputid"
)

// A context carries the index With gave it, a child too, and a context
// that was given none carries none.
func TestWith(t *testing.T) {
	if i, ok := outputid.Of(context.Background()); ok {
		t.Errorf("Of(Background) = %d, true; want none", i)
	}
	ctx, cancel := context.WithCancel(outputid.With(context.Background(), 3))
	defer cancel()
	if i, ok := outputid.Of(ctx); !ok || i != 3 {
		t.Errorf("Of(a child of With(3)) = %d, %v; want 3, true", i, ok)
	}
}
