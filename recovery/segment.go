package recovery

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// A segment file is a sequence of frames, one per entry:
//
//	length  uint32, little endian: the number of payload bytes, >= 1
//	hcrc    uint32: CRC-32C (Castagnoli) of the 4 length bytes
//	pcrc    uint32: CRC-32C of the payload
//	payload the record (an entry, as the driver encodes it)
//
// The length has its own checksum so that a damaged length is told apart
// from a frame cut short by a crash: only the end of the last segment may be
// torn, and a length that claims more bytes than the file holds is trusted
// to mean "torn" only when its checksum is good.
//
// Each append is fsynced before the next starts, and the driver appends one
// frame at a time, so only the last frame of the last segment can be torn:
// cut short (kill -9 during the write), or, after a power loss, with its
// start lost and its end kept (the file's new size and a later page made
// durable, the page holding its start not), which reads as a damaged header
// with nothing whole after it. Damage that a whole frame follows is not a
// torn append.
const (
	frameHeader = 12
	// maxFrame is the largest payload a frame may hold; a longer entry is
	// refused by Append with ErrEntryTooLarge.
	maxFrame = 16 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// appendFrame appends the frame of payload to buf.
func appendFrame(buf, payload []byte) []byte {
	var h [frameHeader]byte
	binary.LittleEndian.PutUint32(h[0:4], uint32(len(payload)))
	binary.LittleEndian.PutUint32(h[4:8], crc32.Checksum(h[0:4], castagnoli))
	binary.LittleEndian.PutUint32(h[8:12], crc32.Checksum(payload, castagnoli))
	buf = append(buf, h[:]...)
	return append(buf, payload...)
}

// frames returns the frames of payloads, one after the other.
func frames(payloads [][]byte) []byte {
	var buf []byte
	for _, p := range payloads {
		buf = appendFrame(buf, p)
	}
	return buf
}

// errTorn marks a frame cut short at the end of a file.
var errTorn = errors.New("torn frame at end of file")

// scanned is the result of reading one segment.
type scanned struct {
	payloads [][]byte // the records, in order
	valid    int64    // bytes of whole, valid frames
	torn     error    // why the bytes after valid were dropped, or nil
}

// scanSegment reads the frames of a segment file's content. A frame torn
// by a crash (header or payload incomplete, payload checksum wrong in the
// frame that ends the file, only zero bytes left, or damage that no whole
// frame follows) ends the scan without error when last is true: torn says
// why, valid where the tail starts. Any other damage, or a torn frame when
// last is false, is a *CorruptError naming path and the frame's offset.
func scanSegment(path string, data []byte, last bool) (scanned, error) {
	var s scanned
	for off := 0; off < len(data); {
		payload, next, err := readFrame(data, off)
		if err != nil && last && !errors.Is(err, errTorn) && !wholeFrameAfter(data, off) {
			err = fmt.Errorf("%w: %w, and no whole frame after it", errTorn, err)
		}
		if errors.Is(err, errTorn) && last {
			s.valid, s.torn = int64(off), err
			return s, nil
		}
		if errors.Is(err, errTorn) {
			err = fmt.Errorf("%w, in a segment that is not the last", err)
		}
		if err != nil {
			return scanned{}, &CorruptError{Path: path, Offset: int64(off), Err: err}
		}
		s.payloads = append(s.payloads, payload)
		off = next
	}
	s.valid = int64(len(data))
	return s, nil
}

// readFrame reads the frame at off in data and returns its payload and the
// offset of the next frame.
func readFrame(data []byte, off int) (payload []byte, next int, err error) {
	rest := data[off:]
	if allZero(rest) {
		return nil, 0, fmt.Errorf("%w: %d zero bytes", errTorn, len(rest))
	}
	if len(rest) < frameHeader {
		return nil, 0, fmt.Errorf("%w: %d of %d header bytes", errTorn, len(rest), frameHeader)
	}
	n := binary.LittleEndian.Uint32(rest[0:4])
	if crc32.Checksum(rest[0:4], castagnoli) != binary.LittleEndian.Uint32(rest[4:8]) {
		return nil, 0, errors.New("frame header checksum mismatch")
	}
	if n == 0 || n > maxFrame {
		return nil, 0, fmt.Errorf("frame length %d out of range [1, %d]", n, maxFrame)
	}
	end := frameHeader + int(n)
	if end > len(rest) {
		return nil, 0, fmt.Errorf("%w: %d of %d payload bytes", errTorn, len(rest)-frameHeader, n)
	}
	payload = rest[frameHeader:end]
	if crc32.Checksum(payload, castagnoli) != binary.LittleEndian.Uint32(rest[8:12]) {
		if end == len(rest) {
			return nil, 0, fmt.Errorf("%w: payload checksum mismatch in the last frame", errTorn)
		}
		return nil, 0, errors.New("payload checksum mismatch")
	}
	return payload, off + end, nil
}

// wholeFrameAfter reports whether a whole, valid frame starts in data after
// off: damage at off that one follows is not the torn end of the log.
func wholeFrameAfter(data []byte, off int) bool {
	for p := off + 1; p+frameHeader < len(data); p++ {
		h := data[p : p+frameHeader]
		n := binary.LittleEndian.Uint32(h[0:4])
		if n == 0 || n > maxFrame || crc32.Checksum(h[0:4], castagnoli) != binary.LittleEndian.Uint32(h[4:8]) {
			continue
		}
		end := p + frameHeader + int(n)
		if end <= len(data) && crc32.Checksum(data[p+frameHeader:end], castagnoli) == binary.LittleEndian.Uint32(h[8:12]) {
			return true
		}
	}
	return false
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
