package shardstate

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Errors a Store returns, wrapped with the key and what was found.
var (
	// ErrNoSnapshot: the shard has no snapshot yet; its state starts empty
	// and its ranges are read from the start of the shard.
	ErrNoSnapshot = errors.New("shardstate: no snapshot")
	// ErrFenced: a newer lease holder (a higher lease counter, or the same
	// counter held by another owner) has claimed the shard's state, or the
	// snapshot would move the position back; the writer must stop.
	ErrFenced = errors.New("shardstate: fenced by a newer lease holder")
	// ErrShapeChanged: the snapshot was written by a pipeline of another
	// shape, whose state this one cannot read.
	ErrShapeChanged = errors.New("shardstate: pipeline shape changed")
	// ErrInvalid: a key, a snapshot or a claim is malformed.
	ErrInvalid = errors.New("shardstate: invalid argument")
	// ErrCorrupt: the stored snapshot does not check (a chunk missing or
	// damaged, a size or checksum mismatch).
	ErrCorrupt = errors.New("shardstate: snapshot corrupt")
)

// Key names the state of one shard of one stream of one application.
type Key struct {
	// Application is the application's name (the lease table's). Required.
	Application string
	// Stream is the Kinesis stream's name. Required.
	Stream string
	// Shard is the shard's ID. Required.
	Shard string
	// Shape identifies the operator chain whose state this is (and the
	// encoding of that state). It is not part of the stored key: a shard has
	// one state, and Get refuses one written under another Shape with
	// ErrShapeChanged, so a changed pipeline neither loads another's state
	// nor silently starts empty.
	Shape string
}

// String returns the key as application/stream/shard.
func (k Key) String() string { return k.Application + "/" + k.Stream + "/" + k.Shard }

func (k Key) validate() error {
	var problems []error
	for _, f := range []struct{ name, v string }{{"Application", k.Application}, {"Stream", k.Stream}, {"Shard", k.Shard}} {
		if f.v == "" {
			problems = append(problems, fmt.Errorf("Key.%s empty", f.name))
		}
	}
	if len(k.Application)+len(k.Stream)+len(k.Shard)+len(k.Shape) > maxKey {
		problems = append(problems, fmt.Errorf("Key %s: longer than %d bytes in all", k, maxKey))
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalid, errors.Join(problems...))
	}
	return nil
}

// maxKey bounds a key's parts, so that a chunk item (key, generation,
// 300 KB of data) stays under DynamoDB's 400 KB item limit.
const maxKey = 768

// Position is the shard position a snapshot reflects: the state holds the
// effect of every record up to and including it. The zero Position is
// none: the state of no record (TRIM_HORIZON).
type Position struct {
	// Sequence is the Kinesis sequence number, a decimal of up to 129
	// digits (the API's pattern 0|([1-9]\d{0,128})), or "" for none.
	Sequence string
	// SubSequence is the index of the last user record within an
	// aggregated (KPL) record, 0 for a plain one.
	SubSequence int64
}

// seqDigits is the most digits a Kinesis sequence number has.
const seqDigits = 129

// order returns a string whose byte order is the positions' order: the
// sequence number zero-padded to seqDigits, then the sub-sequence to 19
// digits. DynamoDB compares it in a condition.
func (p Position) order() string {
	if p.Sequence == "" {
		return ""
	}
	return fmt.Sprintf("%0*s.%019d", seqDigits, p.Sequence, p.SubSequence)
}

func (p Position) validate() error {
	switch {
	case p.Sequence == "" && p.SubSequence != 0:
		return fmt.Errorf("Position: SubSequence %d without a Sequence", p.SubSequence)
	case len(p.Sequence) > seqDigits || strings.Trim(p.Sequence, "0123456789") != "":
		return fmt.Errorf("Position.Sequence %.50q: must be a decimal sequence number of at most %d digits", p.Sequence, seqDigits)
	case p.SubSequence < 0:
		return fmt.Errorf("Position.SubSequence %d: must be >= 0", p.SubSequence)
	}
	return nil
}

// Lease is the writer's hold on the shard's lease: the lease counter it
// holds it at, and its owner name.
type Lease struct {
	// Counter is the lease's leaseCounter when the writer last renewed or
	// took it: every lease write adds one, so a successor always holds a
	// higher counter than the worker it took the lease from.
	Counter int64
	// Owner is the worker holding the lease.
	Owner string
}

func (l Lease) validate() error {
	var problems []error
	if l.Counter < 0 {
		problems = append(problems, fmt.Errorf("Lease.Counter %d: must be >= 0", l.Counter))
	}
	if l.Owner == "" {
		problems = append(problems, errors.New("Lease.Owner empty"))
	}
	return errors.Join(problems...)
}

// Snapshot is a shard's state as of a position, written under a lease.
type Snapshot struct {
	// Data is the state, opaque, of any size (it may be empty).
	Data []byte
	// Position is the shard position Data reflects.
	Position Position
	// Lease is the writer's lease; see Store for the fencing rule.
	Lease Lease
}

// Store keeps one snapshot per shard, readable by every worker.
//
// Fencing: the store keeps, per shard, a fence: the highest lease (counter,
// owner) that claimed or wrote the shard's state. Claim(l) and Put under l
// are admitted when l.Counter is above the fence's, or equal to it with the
// same owner (the fence's own holder writing again); a Put under the fence's
// own lease must also not move the position back from a snapshot written
// under the same counter. Anything else is refused with ErrFenced. A worker
// that takes a lease calls Claim before Get, so a zombie predecessor's late
// Put (a lower counter) can no longer replace the snapshot it loads.
//
// Implementations are safe for concurrent use. Get sees the last completed
// Put, whole: never a mix of two, never a Put cut short by a crash.
type Store interface {
	// Put stores snap as the shard's snapshot, replacing the previous one,
	// if the fencing rule admits snap.Lease.
	Put(ctx context.Context, key Key, snap Snapshot) error
	// Claim raises the shard's fence to lease, if the fencing rule admits
	// it, without changing the snapshot.
	Claim(ctx context.Context, key Key, lease Lease) error
	// Get returns the shard's snapshot: ErrNoSnapshot if it has none,
	// ErrShapeChanged if it was written under another key.Shape.
	Get(ctx context.Context, key Key) (Snapshot, error)
}

// fence is what the fencing rule decides on: the fence, and the lease and
// position of the current snapshot (zero if none).
type fence struct {
	claimed  bool // a claim or a put set lease
	lease    Lease
	snapshot Lease
	has      bool   // a snapshot exists
	order    string // its Position.order()
}

// admits reports whether l may claim (pos == nil) or put a snapshot at
// *pos; see Store.
func (f fence) admits(l Lease, pos *Position) bool {
	switch {
	case !f.claimed || l.Counter > f.lease.Counter:
		return true
	case l.Counter < f.lease.Counter || l.Owner != f.lease.Owner:
		return false
	}
	return pos == nil || !f.has || f.snapshot.Counter < l.Counter || f.order <= pos.order()
}

// fencedError explains a refusal.
func fencedError(key Key, l Lease, f fence) error {
	return fmt.Errorf("%w: shard %s: lease counter %d of %q refused: the state is fenced at counter %d by %q "+
		"(snapshot at counter %d, position %q); this worker lost the lease and must stop writing its state",
		ErrFenced, key, l.Counter, l.Owner, f.lease.Counter, f.lease.Owner, f.snapshot.Counter, strings.TrimLeft(f.order, "0"))
}

// shapeError explains a snapshot of another shape.
func shapeError(key Key, stored string) error {
	return fmt.Errorf("%w: shard %s: the snapshot was written by pipeline shape %q, this pipeline is %q: "+
		"restore the previous pipeline, or delete the shard states of application %q to start with empty state",
		ErrShapeChanged, key, stored, key.Shape, key.Application)
}

// check validates Put's arguments.
func check(key Key, snap Snapshot) error {
	if err := key.validate(); err != nil {
		return err
	}
	if err := errors.Join(snap.Lease.validate(), snap.Position.validate()); err != nil {
		return fmt.Errorf("%w: shard %s: %w", ErrInvalid, key, err)
	}
	return nil
}
