package kinesis

import (
	"errors"
	"strings"
	"testing"

	"github.com/weirstream/weir/batch"
)

// TestCheckRange checks which ranges Recompute accepts: sequence numbers
// as batch.ValidateSeq takes them (up to batch.MaxSeqDigits digits), and
// every problem of a bad range reported at once.
func TestCheckRange(t *testing.T) {
	real56 := "49680702018426575460044220512739241033795924656530653186"
	longest := "1" + strings.Repeat("0", batch.MaxSeqDigits-1)
	ok := batch.SeqRange{Stream: "s", Shard: "shard-0", First: real56, Last: real56, Count: 1}
	with := func(f func(*batch.SeqRange)) batch.SeqRange {
		r := ok
		f(&r)
		return r
	}
	tests := []struct {
		name    string
		rng     batch.SeqRange
		wantErr []string // each must be in the error; nil: no error; "first: " or "last: " first: a bad sequence number
	}{
		{"a real sequence number", ok, nil},
		{"zero", with(func(r *batch.SeqRange) { r.First = "0" }), nil},
		{"the API's longest", with(func(r *batch.SeqRange) { r.Last = longest }), nil},
		{"one digit too many", with(func(r *batch.SeqRange) { r.Last = longest + "0" }), []string{"last: ", "more than 129"}},
		{"leading zero", with(func(r *batch.SeqRange) { r.First = "0" + real56 }), []string{"first: ", "leading zero"}},
		{"empty", with(func(r *batch.SeqRange) { r.First = "" }), []string{"first: ", "empty"}},
		{"sign", with(func(r *batch.SeqRange) { r.Last = "+1" }), []string{"last: ", "not a decimal digit"}},
		{"first after last", with(func(r *batch.SeqRange) { r.First, r.Last = "10", "9" }), []string{"first is after last"}},
		{"every problem at once", batch.SeqRange{First: "x", Last: "", Count: 0},
			[]string{"first: ", "last: ", "stream or shard is empty", "count 0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkRange(tt.rng)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("checkRange: %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("checkRange: nil, want an error with %q", tt.wantErr)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("checkRange: %v, want it to say %q", err, w)
				}
			}
			if bad := strings.Contains(tt.wantErr[0], "first: ") || strings.Contains(tt.wantErr[0], "last: "); bad != errors.Is(err, batch.ErrInvalidSeq) {
				t.Errorf("checkRange: %v: wraps batch.ErrInvalidSeq %v, want %v", err, !bad, bad)
			}
		})
	}
}
