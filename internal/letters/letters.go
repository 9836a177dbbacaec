// Package letters holds what the dead-letter stores share: a letter's name
// and the cutting of a letter too large for its store.
package letters

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/weirstream/weir/stream"
)

// ID names a letter: "<batch time>-<output>-<index>", the batch time in
// milliseconds, as weir deadletters lists and replays it.
func ID(l stream.DeadLetter) string {
	return fmt.Sprintf("%d-%d-%d", int64(l.Time), l.Output, l.Index)
}

// Truncated prefixes the Encoding of a letter whose Record Fit cut: the
// record kept is a prefix of the one quarantined, which cannot be decoded
// or replayed as it is; the letter's Range and Offset still name the
// source record.
const Truncated = "truncated:"

// reserve is the room kept for a marker after a cut.
const reserve = 64

// Fit returns l cut to at most limit bytes of JSON (encoding/json's), and
// whether it cut anything. It cuts, in this order and only as much as
// needed, the Stack, the Panic, the Err and last the Record, each to a
// prefix (at a UTF-8 boundary for the strings) ending with a marker that
// says how many bytes of how many were kept; a cut record's Encoding gets
// the prefix Truncated. The JSON size bounds both a Kinesis record's data
// and a DynamoDB item's size (base64 and escapes only make JSON larger).
// It returns an error if l does not fit even then (limit is smaller than
// the letter's other fields).
func Fit(l stream.DeadLetter, limit int) (stream.DeadLetter, bool, error) {
	size, err := jsonSize(l)
	if err != nil {
		return l, false, err
	}
	cut := false
	for _, f := range []*string{&l.Stack, &l.Panic, &l.Err} {
		if size <= limit {
			return l, cut, nil
		}
		if c := cutString(*f, size-limit); c != *f {
			*f, cut = c, true
		}
		if size, err = jsonSize(l); err != nil {
			return l, cut, err
		}
	}
	if size > limit && len(l.Record) > 0 {
		n := len(l.Record)
		keep := max(0, n-(size-limit)-reserve)
		l.Record = append(l.Record[:keep:keep], fmt.Sprintf("…[record truncated: %d of %d bytes kept]", keep, n)...)
		l.Encoding = Truncated + l.Encoding
		cut = true
		if size, err = jsonSize(l); err != nil {
			return l, cut, err
		}
	}
	if size > limit {
		return l, cut, fmt.Errorf("letter %s: %d bytes of JSON with its stack, panic, error and record cut: over the store's %d", ID(l), size, limit)
	}
	return l, cut, nil
}

// cutString returns s cut to leave over bytes and room for the marker it
// ends with, or s if the marker alone would be as long.
func cutString(s string, over int) string {
	n := len(s)
	if n == 0 {
		return s
	}
	keep := max(0, n-over-reserve)
	for keep > 0 && !utf8.RuneStart(s[keep]) {
		keep--
	}
	c := s[:keep] + fmt.Sprintf("…[truncated: %d of %d bytes kept]", keep, n)
	if len(c) >= n {
		return s
	}
	return c
}

// jsonSize returns the length of l in JSON.
func jsonSize(l stream.DeadLetter) (int, error) {
	b, err := json.Marshal(l)
	if err != nil {
		return 0, fmt.Errorf("letter %s: %w", ID(l), err)
	}
	return len(b), nil
}
