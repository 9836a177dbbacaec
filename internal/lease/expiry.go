package lease

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/weirstream/weir/internal/attempt"
)

// untilExpiry returns ctx ended, with cause attempt.ErrTimeout, when h's
// lease expires on this worker's clock (its last write's start plus
// LeaseDuration): a write that keeps the lease but cannot complete before
// then is abandoned, and the renewal logic counts the lease as lost, since
// other workers may take it from then on.
func (c *Coordinator) untilExpiry(ctx context.Context, h *heldLease) (context.Context, context.CancelFunc) {
	c.mu.Lock()
	left := h.renewed.Add(c.cfg.LeaseDuration).Sub(c.cfg.Clock.Now())
	c.mu.Unlock()
	if left <= 0 {
		expired, cancel := context.WithCancelCause(ctx)
		cancel(attempt.ErrTimeout)
		return expired, func() {}
	}
	return attempt.WithTimeout(ctx, c.cfg.Clock, left)
}

// expiredError returns err, or, if wctx (untilExpiry's) ended because the
// lease expired, an error saying so, wrapping attempt.ErrTimeout and err:
// the SDK reports the write as cancelled, which reads as if the caller
// gave up.
func (c *Coordinator) expiredError(wctx context.Context, err error) error {
	if err == nil || !attempt.TimedOut(wctx) {
		return err
	}
	return fmt.Errorf("leasetable: the lease expired on this worker's clock (not renewed within LeaseDuration %v: a pause, or writes failing) before the write was answered; other workers may take it (%w): %w",
		c.cfg.LeaseDuration, attempt.ErrTimeout, err)
}

// wroteAt records a successful write of h's lease that was sent at
// started. The lease runs from then, not from the answer: another worker
// counts its age from when it saw the write, which landed after it was
// sent, so this worker's view of its lease never outlasts theirs.
func (c *Coordinator) wroteAt(h *heldLease, l Lease, started time.Time) {
	c.mu.Lock()
	c.setHeldLeaseLocked(h, l)
	h.renewed, h.unvouched = started, false
	h.unsure, h.unsureSince = nil, time.Time{}
	c.knowLocked(l)
	c.mu.Unlock()
}

// maxUnsure bounds heldLease.unsure: the checkpoints of the latest
// maxUnsure writes of a lease without a definite answer are kept. An
// earlier one that landed is then not recognised, and the next write,
// refused, loses the lease (this worker may take it back from the
// checkpoint it left): never a lease kept wrongly. Failed writes mostly
// stop when the lease expires, but not while beats keep it and its own
// writes fail (throttled checkpoints): all of them remembered would grow
// without bound.
const maxUnsure = 8

// unanswered records a write of h's lease, sent at started and setting
// the checkpoint to ckpt, that failed without a definite answer: it may
// have been applied (heldLease.unsure). A checkpoint already recorded (the
// renewals of one checkpoint) is recorded once; past maxUnsure, the
// earliest is forgotten. unsureSince stays the time the first was sent:
// a lease adopted from any of them is counted from then, the earliest it
// may have landed.
func (c *Coordinator) unanswered(h *heldLease, ckpt string, started time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(h.unsure) == 0 {
		h.unsureSince = started
	}
	if i := slices.Index(h.unsure, ckpt); i >= 0 {
		h.unsure = slices.Delete(h.unsure, i, i+1) // moved to the latest
	}
	h.unsure = append(h.unsure, ckpt)
	if len(h.unsure) > maxUnsure {
		h.unsure = slices.Delete(h.unsure, 0, len(h.unsure)-maxUnsure)
	}
}

// adoptUnsure makes now, read back after a refused write of h and found
// to be what one of this worker's writes left (whyRefused), h's lease, if
// an earlier write without an answer (heldLease.unsure) may be the one
// that left it: renewed when the first of those was sent, since which one
// landed, and when, is not known. It returns that time and whether it
// did.
func (c *Coordinator) adoptUnsure(h *heldLease, now Lease) (since time.Time, ok bool) {
	c.mu.Lock()
	ok, since = len(h.unsure) > 0, h.unsureSince
	c.mu.Unlock()
	if ok {
		c.wroteAt(h, now, since)
	}
	return since, ok
}
