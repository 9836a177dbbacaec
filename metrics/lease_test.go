package metrics

import (
	"testing"

	"github.com/weirstream/weir/checkpoint/leasetable"
)

// TestDefaultLeaseDuration checks that the default of Config.LeaseDuration,
// copied because this package must not import leasetable (and the AWS SDK
// with it), is still the lease table's.
func TestDefaultLeaseDuration(t *testing.T) {
	if defaultLeaseDuration != leasetable.DefaultLeaseDuration {
		t.Errorf("defaultLeaseDuration %v, leasetable.DefaultLeaseDuration %v: make them equal", defaultLeaseDuration, leasetable.DefaultLeaseDuration)
	}
}
