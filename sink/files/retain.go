package files

import (
	"errors"
	"io/fs"
	"slices"
	"time"

	"github.com/weirstream/weir/batch"
)

// rerunSpan is how far before the batch preceding the one written a
// restart may run batches again: a stateful pipeline logs its empty
// batches in runs of up to 10 s, whose batches complete only when a later
// entry says so, and a crash runs them all again, and the batch after the
// run (the repository's DESIGN.md, "Recovery" and G3).
const rerunSpan = 10 * time.Second

// retain adds the file of the batch at written to the index and removes
// the files of the batches before it that Config.Keep and Config.MaxAge no
// longer keep, but those a restart may run again (see rerunSpan). A file
// it fails to remove stays in the index, to be removed after the next
// write.
func (s *Sink[T]) retain(written batch.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, found := slices.BinarySearch(s.times, written)
	if !found {
		s.times = slices.Insert(s.times, i, written)
	}
	if s.cfg.Keep <= 0 && s.cfg.MaxAge <= 0 {
		return nil
	}
	drop := expired(s.times, s.cfg.Keep, s.cfg.MaxAge)
	// A batch at or after written may still run again, and so may those
	// of the last run of empty batches before it, which reaches rerunSpan
	// back from the batch before written (or from written, the first):
	// only the batches before that lose their files.
	prev := written
	if i > 0 {
		prev = s.times[i-1]
	}
	before, _ := slices.BinarySearch(drop, prev.Add(-rerunSpan))
	drop = drop[:before]
	var failed []batch.Time
	var errs []error
	for _, t := range drop {
		if err := s.dir.Remove(s.Name(t)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			failed = append(failed, t)
			errs = append(errs, err)
		}
	}
	s.times = slices.Replace(s.times, 0, len(drop), failed...)
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
