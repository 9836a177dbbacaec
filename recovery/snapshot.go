package recovery

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/weirstream/weir/batch"
)

// ErrNoSnapshot is wrapped by the error GetSnapshot returns for a reference
// the store does not hold.
var ErrNoSnapshot = errors.New("recovery: no such snapshot")

// SnapshotStore is implemented by a Log that also keeps snapshots of the
// state of a pipeline's stateful operators, beside its entries. The driver
// writes a snapshot with PutSnapshot, then appends SnapshotTaken(t, ref):
// only then is the snapshot current. A crash between the two leaves the
// previous snapshot current and the new one unreferenced. Compact removes
// the snapshots older than the current one.
//
// The three logs of this module implement it: a directory log keeps each
// snapshot in a file of its own, a DynamoDB log in chunked items, a
// MemoryStore in memory.
type SnapshotStore interface {
	// PutSnapshot durably stores data as the snapshot of the state after
	// the batch at t and returns the reference to record with
	// SnapshotTaken. Storing a snapshot at a time again replaces it.
	PutSnapshot(ctx context.Context, t batch.Time, data []byte) (ref string, err error)
	// GetSnapshot returns the data of the snapshot ref names: an error
	// wrapping ErrNoSnapshot if the store does not hold it, a
	// *CorruptError if it is damaged.
	GetSnapshot(ctx context.Context, ref string) ([]byte, error)
}

// snapshotMagic starts every framed snapshot: the format's name and version.
const snapshotMagic = "weirsnp1"

// snapshotHeader is the size of a framed snapshot's header: the magic, the
// batch time (int64), the payload length (uint64) and the payload's CRC-32C.
const snapshotHeader = len(snapshotMagic) + 8 + 8 + 4

// frameSnapshot returns data framed with a header carrying t, its length and
// its checksum, so that a damaged or cut snapshot is detected on reading.
func frameSnapshot(t batch.Time, data []byte) []byte {
	buf := make([]byte, snapshotHeader, snapshotHeader+len(data))
	copy(buf, snapshotMagic)
	n := len(snapshotMagic)
	binary.LittleEndian.PutUint64(buf[n:], uint64(t))
	binary.LittleEndian.PutUint64(buf[n+8:], uint64(len(data)))
	binary.LittleEndian.PutUint32(buf[n+16:], crc32.Checksum(data, castagnoli))
	return append(buf, data...)
}

// unframeSnapshot checks a framed snapshot and returns its time and data.
func unframeSnapshot(b []byte) (batch.Time, []byte, error) {
	if len(b) < snapshotHeader || string(b[:len(snapshotMagic)]) != snapshotMagic {
		return 0, nil, fmt.Errorf("not a snapshot of this format (%d bytes)", len(b))
	}
	n := len(snapshotMagic)
	t := batch.Time(binary.LittleEndian.Uint64(b[n:]))
	size := binary.LittleEndian.Uint64(b[n+8:])
	sum := binary.LittleEndian.Uint32(b[n+16:])
	data := b[snapshotHeader:]
	if uint64(len(data)) != size {
		return 0, nil, fmt.Errorf("snapshot holds %d bytes, its header says %d", len(data), size)
	}
	if crc32.Checksum(data, castagnoli) != sum {
		return 0, nil, errors.New("snapshot checksum mismatch")
	}
	return t, data, nil
}

// FrameSnapshot returns data framed as a SnapshotStore stores it: a header
// with the batch time, the length and a CRC-32C checksum, then data. For
// SnapshotStore implementations outside this package.
func FrameSnapshot(t batch.Time, data []byte) []byte { return frameSnapshot(t, data) }

// UnframeSnapshot checks a snapshot FrameSnapshot framed and returns its time
// and data, or an error saying what is wrong: for SnapshotStore
// implementations outside this package, which wrap it in a *CorruptError.
func UnframeSnapshot(b []byte) (batch.Time, []byte, error) { return unframeSnapshot(b) }

// CurrentSnapshot returns the snapshot a log's entries make current, or nil:
// for SnapshotStore implementations, to know which snapshots Compact may
// remove.
func CurrentSnapshot(payloads [][]byte) (*SnapshotRef, error) {
	entries, err := DecodeEntries(payloads)
	if err != nil {
		return nil, err
	}
	var cur *SnapshotRef
	for _, e := range entries {
		if e.Kind == KindSnapshot {
			cur = &SnapshotRef{Time: e.Time, Ref: e.Ref}
		}
	}
	return cur, nil
}
