package lease

import (
	"context"
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

// wroteAt records a successful write of h's lease that was sent at
// started. The lease runs from then, not from the answer: another worker
// counts its age from when it saw the write, which landed after it was
// sent, so this worker's view of its lease never outlasts theirs.
func (c *Coordinator) wroteAt(h *heldLease, l Lease, started time.Time) {
	c.mu.Lock()
	h.lease, h.renewed, h.unvouched = l, started, false
	c.knowLocked(l)
	c.mu.Unlock()
}
