package recovery_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/weirstream/weir/recovery"
)

// A pipeline is given a directory log with stream.Config{Recovery:
// recovery.Dir(path)}; one writer at a time may hold it. A second open, as
// a second worker started on the same directory would make, fails with
// ErrLocked once LockWait has passed (here at once).
func ExampleDirConfig() {
	dir, err := os.MkdirTemp("", "weir-log")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	cfg := recovery.DirConfig{Path: dir, LockWait: -1}
	first, err := cfg.Open(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer first.Close()
	_, err = cfg.Open(ctx)
	fmt.Println("second writer locked out:", errors.Is(err, recovery.ErrLocked))
	// Output: second writer locked out: true
}
