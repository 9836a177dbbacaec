package metrics

import (
	"testing"

	"github.com/weirstream/weir/internal/lease"
)

// TestDefaultLeaseDuration checks that the default of Config.LeaseDuration,
// copied because this package must not import the lease packages (and the
// AWS SDK with them), is still the lease table's.
func TestDefaultLeaseDuration(t *testing.T) {
	if defaultLeaseDuration != lease.DefaultLeaseDuration {
		t.Errorf("defaultLeaseDuration %v, lease.DefaultLeaseDuration %v: make them equal", defaultLeaseDuration, lease.DefaultLeaseDuration)
	}
}
