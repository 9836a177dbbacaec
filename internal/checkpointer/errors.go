package checkpointer

import "errors"

// ErrInvalidConfig is wrapped by the error a constructor returns for a bad
// Config; the wrapped errors name each bad field and its fix.
var ErrInvalidConfig = errors.New("checkpoint: invalid config")

// ErrClosed is returned by calls made on a Checkpointer or Coordinator after
// it has been closed or drained.
var ErrClosed = errors.New("checkpoint: closed")

// ErrLeaseLost is returned (wrapped, with the shard) when a conditional write
// on a lease fails because another worker took it, or it was released, since
// this worker last saw it. A worker that gets it must stop processing the
// shard and must not checkpoint it again (the zombie rule).
var ErrLeaseLost = errors.New("checkpoint: lease lost")
