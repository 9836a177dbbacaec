package files

import (
	"errors"
	"io/fs"
	"time"

	"github.com/weirstream/weir/batch"
)

// prune removes the files of the batches before written that Config.Keep
// and Config.MaxAge no longer keep; the newest batch's file is always kept.
func (s *Sink[T]) prune(written batch.Time) error {
	if s.cfg.Keep <= 0 && s.cfg.MaxAge <= 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	times, err := s.Batches()
	if err != nil || len(times) == 0 {
		return err
	}
	drop := expired(times, s.cfg.Keep, s.cfg.MaxAge)
	var errs []error
	for _, t := range drop {
		if t >= written {
			break // drop is sorted: a later batch may still run again
		}
		if err := s.dir.Remove(s.Name(t)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// expired returns the batch times among times (sorted, not empty) that keep
// and maxAge do not keep.
func expired(times []batch.Time, keep int, maxAge time.Duration) []batch.Time {
	n := 0 // times[:n] are dropped
	if keep > 0 && len(times) > keep {
		n = len(times) - keep
	}
	if maxAge > 0 {
		oldest := times[len(times)-1].Add(-maxAge)
		for n < len(times)-1 && times[n] < oldest {
			n++
		}
	}
	return times[:n]
}
