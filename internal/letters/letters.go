// Package letters holds what the dead-letter stores share: a letter's name
// and the cutting of a letter too large for its store.
package letters

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sort"
	"unicode/utf8"

	"github.com/weirstream/weir/stream"
)

// ID names a letter: "<batch time>-<output>-<index>", the batch time in
// milliseconds, as weir deadletters lists and replays it.
func ID(l stream.DeadLetter) string {
	return fmt.Sprintf("%d-%d-%d", int64(l.Time), l.Output, l.Index)
}

// FingerprintLen is the length of a Fingerprint: 16 characters of base32,
// 80 bits.
const FingerprintLen = 16

// Fingerprint returns a name of which records letters are: a hash of each
// letter's Range, Offset, Encoding and Record, and its Index if
// withIndex, FingerprintLen characters of base32. Their errors, panics and
// stacks are left out: the same record failing again after a crash, with
// another stack or message, is the same letter.
func Fingerprint(withIndex bool, ls ...stream.DeadLetter) string {
	h := sha256.New()
	var buf []byte
	for _, l := range ls {
		buf = buf[:0]
		if withIndex {
			buf = binary.AppendVarint(buf, int64(l.Index))
		}
		for _, f := range []string{l.Range.Stream, l.Range.Shard, l.Range.First, l.Range.Last, l.Encoding} {
			buf = binary.AppendUvarint(buf, uint64(len(f)))
			buf = append(buf, f...)
		}
		buf = binary.AppendVarint(buf, int64(l.Range.Count))
		buf = binary.AppendVarint(buf, int64(l.Offset))
		buf = binary.AppendUvarint(buf, uint64(len(l.Record)))
		h.Write(buf)
		h.Write(l.Record)
	}
	return base32.StdEncoding.EncodeToString(h.Sum(nil))[:FingerprintLen]
}

// Truncated prefixes the Encoding of a letter whose Record Fit cut: the
// record kept is a prefix of the one quarantined, which cannot be decoded
// or replayed as it is; the letter's Range and Offset still say where it
// was read (stream.DeadLetter): the source record itself for a letter of
// ForEach or a narrow operator, the one it was made of for a
// ForEachBatch's with origins.
const Truncated = "truncated:"

// minCut is the length of a field at or below which Fit leaves it whole:
// its marker would be as long.
const minCut = 64

// Fit returns l cut to at most limit bytes of JSON (encoding/json's), and
// whether it cut anything. It cuts, in this order and only as much as
// needed, the Stack, the Record (whose place in the source its Range and
// Offset still name: see Truncated), the Panic and last the Err, each longer than 64 bytes to
// its longest prefix that fits (at a UTF-8 boundary for the strings) followed
// by a marker that says how many bytes of how many were kept; a cut
// record's Encoding gets the prefix Truncated. The JSON size bounds both a
// Kinesis record's data and a DynamoDB item's size (base64 and escapes
// only make JSON larger). It returns an error if l does not fit even then
// (limit is smaller than the letter's other fields).
func Fit(l stream.DeadLetter, limit int) (stream.DeadLetter, bool, error) {
	size, err := jsonSize(l)
	if err != nil || size <= limit {
		return l, false, err
	}
	cutStr := func(f *string) func(keep int) {
		s := *f
		return func(keep int) {
			for keep > 0 && keep < len(s) && !utf8.RuneStart(s[keep]) {
				keep--
			}
			*f = s[:keep] + fmt.Sprintf("…[truncated: %d of %d bytes kept]", keep, len(s))
		}
	}
	rec, enc := l.Record, l.Encoding
	cutRec := func(keep int) {
		l.Record = append(rec[:keep:keep], fmt.Sprintf("…[record truncated: %d of %d bytes kept]", keep, len(rec))...)
		l.Encoding = Truncated + enc
	}
	fields := []struct {
		n   int
		cut func(keep int)
	}{{len(l.Stack), cutStr(&l.Stack)}, {len(rec), cutRec}, {len(l.Panic), cutStr(&l.Panic)}, {len(l.Err), cutStr(&l.Err)}}
	for _, f := range fields {
		if f.n <= minCut {
			continue
		}
		// The longest prefix that fits, or none.
		keep := sort.Search(f.n, func(k int) bool {
			f.cut(k + 1)
			s, err := jsonSize(l)
			return err != nil || s > limit
		})
		f.cut(keep)
		if size, err = jsonSize(l); err != nil {
			return l, true, err
		}
		if size <= limit {
			return l, true, nil
		}
	}
	return l, true, fmt.Errorf("letter %s: %d bytes of JSON with its stack, panic, error and record cut: over the store's %d", ID(l), size, limit)
}

// jsonSize returns the length of l in JSON.
func jsonSize(l stream.DeadLetter) (int, error) {
	b, err := json.Marshal(l)
	if err != nil {
		return 0, fmt.Errorf("letter %s: %w", ID(l), err)
	}
	return len(b), nil
}
