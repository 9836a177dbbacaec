package batch

import (
	"errors"
	"math/big"
	"strings"
	"testing"
)

func TestCompareSeq(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"0", "0", 0},
		{"9", "10", -1},
		{"10", "9", 1},
		{"123", "124", -1},
		{"49590338271490256608559692538361571095921575989136588898", "49590338271490256608559692538361571095921575989136588898", 0},
		{"49590338271490256608559692538361571095921575989136588898", "49590338271490256608559692540925702759324208523137515618", -1},
		{"340282366920938463463374607431768211455", "340282366920938463463374607431768211454", 1},
		{"007", "7", 0},
		{"08", "10", -1},
	}
	for _, tt := range tests {
		t.Run(tt.a+"_"+tt.b, func(t *testing.T) {
			if got := CompareSeq(tt.a, tt.b); got != tt.want {
				t.Errorf("CompareSeq(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
			}
			if got := CompareSeq(tt.b, tt.a); got != -tt.want {
				t.Errorf("CompareSeq(%q, %q) = %d, want %d", tt.b, tt.a, got, -tt.want)
			}
		})
	}
}

func TestValidateSeq(t *testing.T) {
	tests := []struct {
		s  string
		ok bool
	}{
		{"0", true},
		{"1", true},
		{"340282366920938463463374607431768211456", true}, // 2^128
		{"49590338271490256608559692538361571095921575989136588898", true},
		{"1" + strings.Repeat("0", 128), true},  // 129 digits
		{"1" + strings.Repeat("0", 129), false}, // 130 digits
		{"", false},
		{"-1", false},
		{"+1", false},
		{"01", false},
		{"1a", false},
		{" 1", false},
		{"TRIM_HORIZON", false},
	}
	for _, tt := range tests {
		t.Run(tt.s, func(t *testing.T) {
			err := ValidateSeq(tt.s)
			if (err == nil) != tt.ok {
				t.Fatalf("ValidateSeq(%q) = %v, want ok=%v", tt.s, err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidSeq) {
				t.Errorf("ValidateSeq(%q) = %v, does not wrap ErrInvalidSeq", tt.s, err)
			}
		})
	}
}

func TestMaxSeq(t *testing.T) {
	tests := []struct{ a, b, want string }{
		{"", "", ""},
		{"", "5", "5"},
		{"5", "", "5"},
		{"9", "10", "10"},
		{"10", "9", "10"},
	}
	for _, tt := range tests {
		if got := MaxSeq(tt.a, tt.b); got != tt.want {
			t.Errorf("MaxSeq(%q, %q) = %q, want %q", tt.a, tt.b, got, tt.want)
		}
	}
}

// FuzzCompareSeq checks CompareSeq and ValidateSeq against math/big.
func FuzzCompareSeq(f *testing.F) {
	f.Add("9", "10")
	f.Add("0", "0")
	f.Add("340282366920938463463374607431768211455", "340282366920938463463374607431768211456")
	f.Add("49590338271490256608559692538361571095921575989136588898", "7")
	f.Fuzz(func(t *testing.T, a, b string) {
		ba, okA := new(big.Int).SetString(a, 10)
		bb, _ := new(big.Int).SetString(b, 10)
		errA, errB := ValidateSeq(a), ValidateSeq(b)
		canonical := func(s string, n *big.Int, ok bool) bool {
			return ok && n.Sign() >= 0 && len(s) <= MaxSeqDigits && n.String() == s
		}
		if (errA == nil) != canonical(a, ba, okA) {
			t.Fatalf("ValidateSeq(%q) = %v, disagrees with math/big", a, errA)
		}
		if errA != nil || errB != nil {
			return
		}
		if got, want := CompareSeq(a, b), ba.Cmp(bb); got != want {
			t.Fatalf("CompareSeq(%q, %q) = %d, math/big says %d", a, b, got, want)
		}
	})
}
