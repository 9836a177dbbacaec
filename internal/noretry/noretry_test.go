package noretry

import (
	"errors"
	"fmt"
	"testing"
)

func TestMark(t *testing.T) {
	base := errors.New("refused")
	marked := Mark(base)
	if !Is(marked) || !errors.Is(marked, base) || marked.Error() != base.Error() {
		t.Errorf("Mark(%v) = %v: Is %v, wraps it %v", base, marked, Is(marked), errors.Is(marked, base))
	}
	if wrapped := fmt.Errorf("batch 1: %w", marked); !Is(wrapped) {
		t.Errorf("Is(%v) = false for a wrapped marked error", wrapped)
	}
	if Is(base) || Is(nil) || Mark(nil) != nil {
		t.Errorf("Is(unmarked) = %v, Is(nil) = %v, Mark(nil) = %v", Is(base), Is(nil), Mark(nil))
	}
}
