//go:build !unix

package dirlock

import "os"

// File refuses: without flock(2), a directory could not be kept to one
// owner.
func File(*os.File) error {
	return ErrUnsupported
}
