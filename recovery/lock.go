package recovery

import (
	"errors"
	"fmt"
	"os"

	"github.com/weirstream/weir/internal/dirlock"
)

// lockFile takes an exclusive flock(2) on f without waiting (see package
// dirlock): ErrLocked if another open file holds it.
func lockFile(f *os.File) error {
	err := dirlock.File(f)
	switch {
	case errors.Is(err, dirlock.ErrLocked):
		return ErrLocked
	case errors.Is(err, dirlock.ErrUnsupported):
		return fmt.Errorf("%w: use a DynamoDB log", err)
	}
	return err
}
