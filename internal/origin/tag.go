package origin

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/weirstream/weir/batch"
)

// magic starts every tagged record. 0xF6 is never a byte of UTF-8 text.
const magic = "\xF6weir"

// Version is the newest version of the envelope: Append writes version 2
// for a tag with an origin (Seq set), version 1 otherwise.
const Version = 2

// MaxWriterLen is the longest writer name a tag holds, in bytes.
const MaxWriterLen = 128

// MaxNameLen is the longest origin stream name or shard ID a version 2 tag
// holds, in bytes (Kinesis allows 128 characters for both).
const MaxNameLen = 256

// MaxOverhead is the most bytes Append adds to a payload, whatever the
// tag: a version 2 tag of the longest stream name and shard ID, the longest
// sequence numbers, sharing no digit, and the largest sub-sequence and
// index (a version 1 tag, of at most MaxWriterLen bytes of writer, adds
// less). A writer that must know a record fits before its tag is known
// counts this much for it.
const MaxOverhead = len(magic) + 1 +
	2 + MaxNameLen + // the stream name and its length (a uvarint of 2 bytes)
	2 + MaxNameLen + // the shard ID and its length plus 1
	2 + (batch.MaxSeqDigits+1)/2 + // the sequence number, two digits a byte
	2*binary.MaxVarintLen64 + // the sub-sequence number and the index
	1 + 2 + (batch.MaxSeqDigits+1)/2 // the range start: no common prefix, all its digits

// Tag is the origin of one record a weir sink wrote. A version 1 tag (Seq
// empty) names the writer, the batch and the record's index in the batch:
// the same for one writer replaying its own batches, but not for a fleet,
// where a lease that moves has another worker write the same source records
// in its own batches. A version 2 tag (Seq set) names the source record the
// record came from, which is the same whoever writes it, and the start of
// the writing batch's range of that source shard (see Filter).
type Tag struct {
	// Writer names the writer (version 1): one pipeline's output, the same
	// across its restarts, different from every other writer of the
	// stream. Empty in version 2.
	Writer string
	// Batch is the batch time, in milliseconds since the Unix epoch
	// (version 1). Zero in version 2.
	Batch int64
	// Index is, in version 1, the record's position in its batch, from 0;
	// in version 2, its position among the records its source record
	// produced (FlatMap's fan-out; 0 for Map and Filter).
	Index uint64

	// Stream and Shard name the source shard the record came from
	// (version 2), at most MaxNameLen bytes each.
	Stream, Shard string
	// Seq and SubSeq are the position of the source record in its shard:
	// its sequence number (decimal, see batch.ValidateSeq) and its
	// sub-sequence number in a KPL aggregate (0 for a plain record).
	// Version 2 when Seq is set.
	Seq    string
	SubSeq uint64
	// RangeStart is the first sequence number of the writing batch's range
	// of the source shard: at most Seq (version 2).
	RangeStart string
}

// v2 reports whether t is a version 2 tag.
func (t Tag) v2() bool { return t.Seq != "" }

// ErrMalformed is wrapped by the error Decode returns for data that starts
// with the magic bytes but is not a tag weir can read.
var ErrMalformed = errors.New("origin: malformed tag")

// Overhead returns the bytes Append adds to a payload for t.
func Overhead(t Tag) int {
	if t.v2() {
		p := commonPrefix(t.Seq, t.RangeStart)
		rest := len(t.RangeStart) - p
		return len(magic) + 1 + uvarintLen(uint64(len(t.Stream))) + len(t.Stream) +
			shardLen(t.Shard) + digitsLen(t.Seq) + uvarintLen(t.SubSeq) + uvarintLen(t.Index) +
			uvarintLen(uint64(p)) + uvarintLen(uint64(rest)) + (rest+1)/2
	}
	return len(magic) + 1 + uvarintLen(uint64(len(t.Writer))) + len(t.Writer) +
		uvarintLen(zigzag(t.Batch)) + uvarintLen(t.Index)
}

// Append appends to dst the envelope of payload tagged with t and returns
// the extended slice: version 2 if t.Seq is set, else version 1. t.Writer
// must be at most MaxWriterLen bytes, t.Stream and t.Shard at most
// MaxNameLen, t.Seq and t.RangeStart valid sequence numbers with
// t.RangeStart <= t.Seq (the caller checks them).
func Append(dst []byte, t Tag, payload []byte) []byte {
	dst = append(dst, magic...)
	if t.v2() {
		dst = append(dst, 2)
		dst = binary.AppendUvarint(dst, uint64(len(t.Stream)))
		dst = append(dst, t.Stream...)
		if n, ok := shardNumber(t.Shard); ok {
			dst = append(dst, 0)
			dst = binary.AppendUvarint(dst, n)
		} else {
			dst = binary.AppendUvarint(dst, uint64(len(t.Shard))+1)
			dst = append(dst, t.Shard...)
		}
		dst = appendDigits(dst, t.Seq)
		dst = binary.AppendUvarint(dst, t.SubSeq)
		dst = binary.AppendUvarint(dst, t.Index)
		p := commonPrefix(t.Seq, t.RangeStart)
		dst = binary.AppendUvarint(dst, uint64(p))
		dst = appendDigits(dst, t.RangeStart[p:])
		return append(dst, payload...)
	}
	dst = append(dst, 1)
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
	switch rest[0] {
	case 1:
	case 2:
		return decodeV2(rest[1:])
	default:
		return Tag{}, nil, false, fmt.Errorf("%w: version %d, this weir reads versions 1 to %d", ErrMalformed, rest[0], Version)
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

// decodeV2 decodes what follows the version byte of a version 2 tag.
func decodeV2(rest []byte) (t Tag, payload []byte, ok bool, err error) {
	r := reader{b: rest}
	n := r.uvarint()
	if r.err == nil && n > MaxNameLen {
		r.err = fmt.Errorf("stream name of %d bytes", n)
	}
	t.Stream = string(r.bytes(int(min(n, MaxNameLen))))
	t.Shard = r.shard()
	t.Seq = r.digits()
	t.SubSeq, t.Index = r.uvarint(), r.uvarint()
	t.RangeStart = r.rangeStart(t.Seq)
	if r.err == nil && batch.CompareSeq(t.RangeStart, t.Seq) > 0 {
		r.err = errors.New("range start after the sequence number")
	}
	if r.err != nil {
		return Tag{}, nil, false, fmt.Errorf("%w: version 2: %w", ErrMalformed, r.err)
	}
	return t, r.b, true, nil
}

// shardPrefix starts the IDs of Kinesis shards, followed by shardDigits
// decimal digits: a tag holds such an ID as its number.
const (
	shardPrefix = "shardId-"
	shardDigits = 12
)

// shardNumber returns the number of a shard ID of Kinesis's form.
func shardNumber(id string) (uint64, bool) {
	if len(id) != len(shardPrefix)+shardDigits || id[:len(shardPrefix)] != shardPrefix {
		return 0, false
	}
	var n uint64
	for _, c := range []byte(id[len(shardPrefix):]) {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, true
}

// shardLen returns the bytes a tag takes for shard ID id: 0 and its
// number for a Kinesis shard ID, else its length plus 1 and its bytes.
func shardLen(id string) int {
	if n, ok := shardNumber(id); ok {
		return 1 + uvarintLen(n)
	}
	return uvarintLen(uint64(len(id))+1) + len(id)
}

// shard reads a shard ID as Append wrote it.
func (r *reader) shard() string {
	l := r.uvarint()
	switch {
	case r.err != nil:
		return ""
	case l > 0:
		if l-1 > MaxNameLen {
			r.err = fmt.Errorf("shard ID of %d bytes", l-1)
			return ""
		}
		return string(r.bytes(int(l - 1)))
	}
	n := r.uvarint()
	var b [len(shardPrefix) + shardDigits]byte
	copy(b[:], shardPrefix)
	for i := len(b) - 1; i >= len(shardPrefix); i-- {
		b[i] = '0' + byte(n%10)
		n /= 10
	}
	if n != 0 && r.err == nil {
		r.err = errors.New("shard number of more than 12 digits")
	}
	return string(b[:])
}

// commonPrefix returns the length of the longest common prefix of a and b.
func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// rangeStart reads a range start as Append wrote it: the length of its
// common prefix with seq, then its other digits as appendDigits writes them.
func (r *reader) rangeStart(seq string) string {
	p := r.uvarint()
	if r.err == nil && p > uint64(len(seq)) {
		r.err = fmt.Errorf("range start sharing %d digits with a sequence number of %d", p, len(seq))
	}
	if r.err != nil {
		return ""
	}
	return r.seq(seq[:p])
}

// appendDigits appends sequence number s packed two decimal digits a byte:
// its number of digits (uvarint), then the digits, high nibble first, a
// zero nibble after an odd last one.
func appendDigits(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	for i := 0; i < len(s); i += 2 {
		b := (s[i] - '0') << 4
		if i+1 < len(s) {
			b |= s[i+1] - '0'
		}
		dst = append(dst, b)
	}
	return dst
}

// digitsLen returns the length appendDigits gives s.
func digitsLen(s string) int { return uvarintLen(uint64(len(s))) + (len(s)+1)/2 }

// digits reads a sequence number appendDigits wrote.
func (r *reader) digits() string { return r.seq("") }

// seq reads digits appendDigits wrote and returns the sequence number
// they end, after prefix.
func (r *reader) seq(prefix string) string {
	n := r.uvarint()
	if r.err == nil && (uint64(len(prefix))+n == 0 || uint64(len(prefix))+n > batch.MaxSeqDigits) {
		r.err = fmt.Errorf("sequence number of %d digits", uint64(len(prefix))+n)
	}
	if r.err != nil {
		return ""
	}
	packed := r.bytes(int(n+1) / 2)
	var buf [batch.MaxSeqDigits + 1]byte
	s := append(buf[:0], prefix...)
	for _, b := range packed {
		s = append(s, '0'+b>>4, '0'+b&15)
	}
	if n%2 == 1 && packed[len(packed)-1]&15 != 0 && r.err == nil {
		r.err = errors.New("sequence number with a non-zero pad nibble")
	}
	s = s[:len(prefix)+int(n)]
	if err := batch.ValidateSeq(string(s)); err != nil && r.err == nil {
		r.err = err
	}
	return string(s)
}

// zigzag is the unsigned form binary.AppendVarint writes.
func zigzag(v int64) uint64 { return uint64(v<<1) ^ uint64(v>>63) }

// uvarintLen returns the length of v as a uvarint.
func uvarintLen(v uint64) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], v)
}
