package origin

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// magic starts every tagged record. 0xF6 is never a byte of UTF-8 text.
const magic = "\xF6weir"

// Version is the version of the envelope Append writes.
const Version = 1

// MaxWriterLen is the longest writer name a tag holds, in bytes.
const MaxWriterLen = 128

// Tag is the origin of one record a weir sink wrote: which writer, which
// batch, which record of the batch.
type Tag struct {
	// Writer names the writer: one pipeline's output, the same across its
	// restarts, different from every other writer of the stream.
	Writer string
	// Batch is the batch time, in milliseconds since the Unix epoch.
	Batch int64
	// Index is the record's position in its batch, from 0.
	Index uint64
}

// ErrMalformed is wrapped by the error Decode returns for data that starts
// with the magic bytes but is not a tag weir can read.
var ErrMalformed = errors.New("origin: malformed tag")

// Overhead returns the bytes Append adds to a payload for t.
func Overhead(t Tag) int {
	return len(magic) + 1 + uvarintLen(uint64(len(t.Writer))) + len(t.Writer) +
		uvarintLen(zigzag(t.Batch)) + uvarintLen(t.Index)
}

// Append appends to dst the envelope of payload tagged with t and returns
// the extended slice. t.Writer must be at most MaxWriterLen bytes (the
// caller checks it once).
func Append(dst []byte, t Tag, payload []byte) []byte {
	dst = append(dst, magic...)
	dst = append(dst, Version)
	dst = binary.AppendUvarint(dst, uint64(len(t.Writer)))
	dst = append(dst, t.Writer...)
	dst = binary.AppendVarint(dst, t.Batch)
	dst = binary.AppendUvarint(dst, t.Index)
	return append(dst, payload...)
}

// Tagged reports whether data starts with the envelope's magic bytes.
func Tagged(data []byte) bool { return bytes.HasPrefix(data, []byte(magic)) }

// Decode splits a tagged record into its tag and payload (a sub-slice of
// data). ok is false, with no error, for data that is not tagged: it is a
// plain record. Data that starts with the magic bytes but cannot be read
// (cut short, an unknown version, a writer name too long) gives an error
// wrapping ErrMalformed; the caller should deliver such a record as it is,
// never drop it.
func Decode(data []byte) (t Tag, payload []byte, ok bool, err error) {
	if !Tagged(data) {
		return Tag{}, nil, false, nil
	}
	rest := data[len(magic):]
	if len(rest) == 0 {
		return Tag{}, nil, false, fmt.Errorf("%w: no version", ErrMalformed)
	}
	if rest[0] != Version {
		return Tag{}, nil, false, fmt.Errorf("%w: version %d, this weir reads version %d", ErrMalformed, rest[0], Version)
	}
	rest = rest[1:]
	n, k := binary.Uvarint(rest)
	if k <= 0 || n > MaxWriterLen || uint64(len(rest)-k) < n {
		return Tag{}, nil, false, fmt.Errorf("%w: bad writer name length", ErrMalformed)
	}
	t.Writer = string(rest[k : k+int(n)])
	rest = rest[k+int(n):]
	if t.Batch, k = binary.Varint(rest); k <= 0 {
		return Tag{}, nil, false, fmt.Errorf("%w: bad batch time", ErrMalformed)
	}
	rest = rest[k:]
	if t.Index, k = binary.Uvarint(rest); k <= 0 {
		return Tag{}, nil, false, fmt.Errorf("%w: bad index", ErrMalformed)
	}
	return t, rest[k:], true, nil
}

// zigzag is the unsigned form binary.AppendVarint writes.
func zigzag(v int64) uint64 { return uint64(v<<1) ^ uint64(v>>63) }

// uvarintLen returns the length of v as a uvarint.
func uvarintLen(v uint64) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], v)
}
