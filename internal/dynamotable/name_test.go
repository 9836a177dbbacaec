package dynamotable

import (
	"strings"
	"testing"
)

// TestCheckName checks DynamoDB's table name rule at its edges.
func TestCheckName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"abc", true},
		{"A-z_0.9", true},
		{strings.Repeat("t", 255), true},
		{"", false},
		{"ab", false},
		{strings.Repeat("t", 256), false},
		{"my table", false},
		{"tablé", false},
		{"a/b/c", false},
	} {
		if err := CheckName(tc.name); (err == nil) != tc.ok {
			t.Errorf("CheckName(%.20q) = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}
