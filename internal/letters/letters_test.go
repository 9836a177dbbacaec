package letters

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/weirstream/weir/stream"
)

// TestFit checks what Fit cuts, in order, and that what it returns fits.
func TestFit(t *testing.T) {
	base := stream.DeadLetter{Time: 1700000000000, Output: 2, Index: 3, Record: []byte("rec"), Encoding: "json", Err: "panic: p", Panic: "p", Stack: "stack"}
	withStack := base
	withStack.Stack = strings.Repeat("é", 5000) // two bytes a rune: cut at a boundary
	withRecord := base
	withRecord.Record = []byte(strings.Repeat("r", 30000))
	withErr := base
	withErr.Err = strings.Repeat("\x01", 3000) // six bytes of JSON each
	for _, tt := range []struct {
		name     string
		l        stream.DeadLetter
		limit    int
		cut      bool
		encoding string
	}{
		{"fits", base, 1000, false, "json"},
		{"stack", withStack, 2000, true, "json"},
		{"record", withRecord, 2000, true, "truncated:json"},
		{"escaped error", withErr, 2000, true, "json"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, cut, err := Fit(tt.l, tt.limit)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(got)
			if cut != tt.cut || got.Encoding != tt.encoding || len(b) > tt.limit {
				t.Errorf("Fit = cut %v, encoding %q, %d bytes; want cut %v, %q, at most %d", cut, got.Encoding, len(b), tt.cut, tt.encoding, tt.limit)
			}
			if tt.cut && len(b) < tt.limit-100 {
				t.Errorf("Fit left %d bytes of %d: cut too much", len(b), tt.limit)
			}
			if !json.Valid(b) || !strings.HasPrefix(string(got.Record), string(tt.l.Record[:min(3, len(tt.l.Record))])) {
				t.Errorf("Fit = %+v: want a prefix of the record", got)
			}
		})
	}
	if _, _, err := Fit(base, 50); err == nil || !strings.Contains(err.Error(), "1700000000000-2-3") {
		t.Errorf("Fit with a limit below the letter's fields = %v, want an error naming the letter", err)
	}
}
