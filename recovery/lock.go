package recovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/dirlock"
)

// lockFile takes an exclusive flock(2) on f (see package dirlock), waiting
// up to wait for another holder to release it, as a predecessor that is
// exiting does, and logging the wait: ErrLocked if it is still held then.
func lockFile(ctx context.Context, f *os.File, wait time.Duration, logger *slog.Logger) error {
	err := dirlock.FileWait(ctx, f, clock.Real{}, wait, func() {
		logger.Warn("recovery: the log directory is locked by another writer; waiting for it to exit",
			"lock", f.Name(), "wait", wait)
	})
	switch {
	case errors.Is(err, dirlock.ErrLocked):
		return ErrLocked
	case errors.Is(err, dirlock.ErrUnsupported):
		return fmt.Errorf("%w: use a DynamoDB log", err)
	}
	return err
}
