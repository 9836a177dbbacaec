package recoverylog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/weirstream/weir/batch"
)

// snapshotMagic starts every framed snapshot: the format's name and version.
const snapshotMagic = "weirsnp1"

// snapshotHeader is the size of a framed snapshot's header: the magic, the
// batch time (int64), the payload length (uint64) and the payload's CRC-32C.
const snapshotHeader = len(snapshotMagic) + 8 + 8 + 4

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// frameSnapshot returns data framed with a header carrying t, its length and
// its checksum, so that a damaged or cut snapshot is detected on reading.
// This is what a recovery.SnapshotStore stores.
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
