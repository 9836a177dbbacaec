package metrics_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLinksNoAWS checks that metrics, its Prometheus exporter and the status
// page depend on no AWS package and on no source: metrics defines what it
// reads (Receiver, LeaseLister) and kinesismetrics adapts the Kinesis side,
// so a program that does not read Kinesis links none of it (issue 19).
func TestLinksNoAWS(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".", "./prometheus", "../status").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for pkg := range strings.FieldsSeq(string(out)) {
		if strings.HasPrefix(pkg, "github.com/aws/") ||
			strings.HasPrefix(pkg, "github.com/weirstream/weir/source/") ||
			strings.HasPrefix(pkg, "github.com/weirstream/weir/checkpoint/leasetable") ||
			strings.HasPrefix(pkg, "github.com/weirstream/weir/internal/lease") {
			t.Errorf("metrics depends on %s", pkg)
		}
	}
}
