package repartition

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestShortKey checks that a long key is cut in an error's text without
// cutting a character in two: a key of two-byte characters cut at an odd
// byte gave the text half a character, not valid UTF-8.
func TestShortKey(t *testing.T) {
	for _, k := range []string{strings.Repeat("é", 40), "x" + strings.Repeat("é", 40), "short"} {
		got := shortKey(k)
		if !utf8.ValidString(got) {
			t.Errorf("shortKey(%q) = %q, not valid UTF-8", k, got)
		}
		if len(k) > 64 && !strings.Contains(got, "bytes)") {
			t.Errorf("shortKey(%q) = %q, want it cut and its size given", k, got)
		}
	}
}
