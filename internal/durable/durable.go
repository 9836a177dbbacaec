// Package durable holds what weir's local files need to survive a crash:
// SyncDir makes a directory's entries (files created, renamed, removed)
// durable. The recovery log, the file sink and the lease table's state
// directory use it.
package durable

import (
	"fmt"
	"os"
)

// SyncDir fsyncs directory dir, making the creation, renaming and removal
// of its files durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}
