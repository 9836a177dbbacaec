package streak

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/weirstream/weir/internal/attempt"
)

// Kinds is the runs of failures of one kind of call (a checkpoint commit,
// a load of a shard's state) on many keys (shards), grouped by kind of
// failure (Kind), so that an outage on many keys is warned about once,
// and a failure of a new kind is warned about once too while a run of
// another kind goes on: one shard whose calls fail for a reason of its own
// (a conditional check on its item alone) does not hide a later outage of
// the others. A run of a kind starts with the first key failing so and
// ends when the last key that failed so since succeeds or is let go
// (Ended); a key failing by turns with two kinds is in the runs of both
// until it succeeds, so that it warns twice, not at every try. The zero
// value is ready to use; a Kinds is not safe for concurrent use: its owner
// guards it.
type Kinds struct {
	keys map[string]map[string]bool // key → the kinds of run it fails in
	runs map[string]*kindRun        // kind → its run
}

// kindRun is the run of failures of one kind.
type kindRun struct {
	keys  int       // failing in it
	since time.Time // of its first failure
}

// Failed records that key's call failed with err at now. It returns the
// failure's kind, whether the failure starts a run of that kind (its
// caller warns, with the fix), and how many keys fail in the run.
func (k *Kinds) Failed(key string, err error, now time.Time) (kind string, first bool, failing int) {
	kind = Kind(err)
	if k.keys == nil {
		k.keys, k.runs = make(map[string]map[string]bool), make(map[string]*kindRun)
	}
	r := k.runs[kind]
	if r == nil {
		r = &kindRun{since: now}
		k.runs[kind], first = r, true
	}
	if k.keys[key] == nil {
		k.keys[key] = make(map[string]bool)
	}
	if !k.keys[key][kind] {
		k.keys[key][kind] = true
		r.keys++
	}
	return kind, first, r.keys
}

// Ended records that key's call succeeded, or that key is let go (it
// calls no more). It returns the kinds whose runs that ends, each with
// the time of its first failure, and whether key was failing.
func (k *Kinds) Ended(key string) (over map[string]time.Time, was bool) {
	kinds := k.keys[key]
	delete(k.keys, key)
	for kind := range kinds {
		r := k.runs[kind]
		if r.keys--; r.keys == 0 {
			delete(k.runs, kind)
			if over == nil {
				over = make(map[string]time.Time)
			}
			over[kind] = r.since
		}
	}
	return over, len(kinds) > 0
}

// Failing reports whether key is in a run.
func (k *Kinds) Failing(key string) bool { return len(k.keys[key]) > 0 }

// Kind names the kind of a failed call's error, by which Kinds groups
// failures: the error code the service answered with (an AWS API error's
// ErrorCode, such as ConditionalCheckFailedException or
// ServiceUnavailable); "no answer" for a call that got none (a connection
// refused or broken, a timeout: the SDK's, or an attempt abandoned by
// internal/attempt, whose error keeps only the SDK's text); else "other".
// Errors of the same kind on many keys are one outage.
func Kind(err error) string {
	var coded interface{ ErrorCode() string }
	var netErr net.Error
	switch {
	case errors.As(err, &coded) && coded.ErrorCode() != "":
		return coded.ErrorCode()
	case errors.As(err, &netErr), errors.Is(err, context.DeadlineExceeded), errors.Is(err, attempt.ErrTimeout):
		return "no answer"
	}
	return "other"
}
