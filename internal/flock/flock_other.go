//go:build !unix

package flock

import (
	"errors"
	"os"
)

// lock refuses: without flock(2) no lock would prove anything.
func lock(*os.File) error {
	return errors.New("file locks need flock(2), which this platform lacks")
}
