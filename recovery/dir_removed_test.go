package recovery_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirstream/weir/internal/recoverylog/logtest"
	"github.com/weirstream/weir/recovery"
)

// TestDirRemovedFailsAppend removes the log's directory, or only its
// segment files, while the log is open, as rm -rf or a cleaner of /tmp
// (systemd-tmpfiles, tmpwatch) does: the next append fails, naming the
// directory and the fix. Before, appends went on into the unlinked
// segment's open file and succeeded: the pipeline acknowledged blocks no
// restart would find, and a crash lost the log without a word.
func TestDirRemovedFailsAppend(t *testing.T) {
	for _, c := range []struct {
		name   string
		remove func(dir string) error
	}{
		{"directory", os.RemoveAll},
		{"segments", func(dir string) error {
			segs, err := filepath.Glob(filepath.Join(dir, "*.log"))
			if err != nil || len(segs) == 0 {
				t.Fatalf("segments of %s: %v, %v", dir, segs, err)
			}
			for _, s := range segs {
				if err := os.Remove(s); err != nil {
					return err
				}
			}
			return nil
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "log")
			l := openDir(t, recovery.Dir(dir))
			logtest.MustAppend(t, l, logtest.Block(0, 0))
			if err := c.remove(dir); err != nil {
				t.Fatal(err)
			}
			err := l.Append(t.Context(), logtest.Block(0, 1))
			if err == nil {
				t.Fatal("Append after the log's files were removed returned nil")
			}
			for _, want := range []string{dir, "removed", "fix:"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Append = %v\nwant it to say %q", err, want)
				}
			}
		})
	}
}
