package batch

import (
	"errors"
	"fmt"
	"strings"
)

// MaxSeqDigits is the number of decimal digits of the longest sequence number
// weir accepts: the Kinesis API's pattern for a sequence number is
// 0|([1-9]\d{0,128}). Real ones are far longer than 64 bits (today they have
// 56 digits), so they are kept as strings and compared with CompareSeq.
const MaxSeqDigits = 129

// ErrInvalidSeq is wrapped by the error ValidateSeq returns for a string that is
// not a sequence number.
var ErrInvalidSeq = errors.New("batch: invalid sequence number")

// ValidateSeq reports whether s is a sequence number: a non-empty string of at
// most MaxSeqDigits decimal digits, without a sign or leading zeros (except
// "0" itself).
func ValidateSeq(s string) error {
	if s == "" {
		return fmt.Errorf("%w: empty", ErrInvalidSeq)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return fmt.Errorf("%w: %q: byte %d is not a decimal digit", ErrInvalidSeq, s, i)
		}
	}
	if len(s) > 1 && s[0] == '0' {
		return fmt.Errorf("%w: %q: leading zero", ErrInvalidSeq, s)
	}
	if len(s) > MaxSeqDigits {
		return fmt.Errorf("%w: %d digits, more than %d", ErrInvalidSeq, len(s), MaxSeqDigits)
	}
	return nil
}

// CompareSeq compares two sequence numbers as the numbers they denote and
// returns -1, 0 or +1. Both must be valid (see ValidateSeq); leading zeros are
// tolerated so that a caller's zero-padded numbers still compare correctly.
//
// Comparing the strings directly would be wrong: "9" < "10" numerically but
// not as strings.
func CompareSeq(a, b string) int {
	a = strings.TrimLeft(a, "0")
	b = strings.TrimLeft(b, "0")
	switch {
	case len(a) < len(b):
		return -1
	case len(a) > len(b):
		return 1
	}
	return strings.Compare(a, b)
}

// SeqLess reports whether sequence number a is numerically less than b.
func SeqLess(a, b string) bool { return CompareSeq(a, b) < 0 }

// MaxSeq returns the numerically greater of a and b. An empty string counts as
// "no sequence number" and loses to any other.
func MaxSeq(a, b string) string {
	if a == "" {
		return b
	}
	if b == "" || CompareSeq(a, b) >= 0 {
		return a
	}
	return b
}
