//go:build !unix

package recovery

import (
	"errors"
	"os"
)

// lockFile refuses: without flock(2), a directory log could not keep a
// second writer out.
func lockFile(*os.File) error {
	return errors.New("directory logs need flock(2), which this platform lacks; use a DynamoDB log")
}
