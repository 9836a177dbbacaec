package kinesistest

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Sequence numbers are 56 decimal digits, as Kinesis's: "49", a 24-digit
// counter shared by every shard of the fake (so numbers grow with time, and
// within each shard), and the 30-digit index of the shard, so a number used
// on another shard is recognised and refused, as Kinesis does.
const (
	seqPrefix      = "49"
	seqCounterLen  = 24
	seqShardLen    = 30
	seqLen         = len(seqPrefix) + seqCounterLen + seqShardLen
	iteratorPrefix = "kinesistest-iterator:"
	tokenPrefix    = "kinesistest-token:"
)

// formatSeq returns the sequence number of counter n on shard index.
func formatSeq(n uint64, index int) string {
	return fmt.Sprintf("%s%0*d%0*d", seqPrefix, seqCounterLen, n, seqShardLen, index)
}

// parseSeq returns the counter and shard index of a sequence number the
// fake made, or an *types.InvalidArgumentException.
func parseSeq(s string) (uint64, int, error) {
	bad := invalidArgument("StartingSequenceNumber %q: not a sequence number of this stream", s)
	if len(s) != seqLen || !strings.HasPrefix(s, seqPrefix) {
		return 0, 0, bad
	}
	n, err := strconv.ParseUint(s[len(seqPrefix):len(seqPrefix)+seqCounterLen], 10, 64)
	if err != nil {
		return 0, 0, bad
	}
	index, err := strconv.Atoi(s[len(seqPrefix)+seqCounterLen:])
	if err != nil {
		return 0, 0, bad
	}
	return n, index, nil
}

// iterator is what a shard iterator string encodes.
type iterator struct {
	stream string
	shard  string
	pos    int       // index of the next record to read
	issued time.Time // for IteratorTTL
	gen    uint64    // for ExpireIterators
}

// encode returns the opaque iterator string.
func (it iterator) encode() string {
	raw := strings.Join([]string{it.stream, it.shard, strconv.Itoa(it.pos), strconv.FormatInt(it.issued.UnixNano(), 10), strconv.FormatUint(it.gen, 10)}, "\x00")
	return base64.RawURLEncoding.EncodeToString([]byte(iteratorPrefix + raw))
}

// decodeIterator parses an iterator string, or returns an
// *types.InvalidArgumentException.
func decodeIterator(s string) (iterator, error) {
	bad := invalidArgument("Invalid ShardIterator: %q", s)
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return iterator{}, bad
	}
	rest, ok := strings.CutPrefix(string(raw), iteratorPrefix)
	parts := strings.Split(rest, "\x00")
	if !ok || len(parts) != 5 {
		return iterator{}, bad
	}
	pos, err1 := strconv.Atoi(parts[2])
	issued, err2 := strconv.ParseInt(parts[3], 10, 64)
	gen, err3 := strconv.ParseUint(parts[4], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || pos < 0 {
		return iterator{}, bad
	}
	return iterator{stream: parts[0], shard: parts[1], pos: pos, issued: time.Unix(0, issued), gen: gen}, nil
}

// token is what a ListShards NextToken encodes.
type token struct {
	stream string
	next   int // index of the next shard to list
	issued time.Time
	max    int // MaxResults of the listing
}

// encode returns the opaque token string.
func (t token) encode() string {
	raw := strings.Join([]string{t.stream, strconv.Itoa(t.next), strconv.FormatInt(t.issued.UnixNano(), 10), strconv.Itoa(t.max)}, "\x00")
	return base64.RawURLEncoding.EncodeToString([]byte(tokenPrefix + raw))
}

// decodeToken parses a NextToken, or returns an
// *types.InvalidArgumentException.
func decodeToken(s string) (token, error) {
	bad := invalidArgument("Invalid NextToken: %q", s)
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return token{}, bad
	}
	rest, ok := strings.CutPrefix(string(raw), tokenPrefix)
	parts := strings.Split(rest, "\x00")
	if !ok || len(parts) != 4 {
		return token{}, bad
	}
	next, err1 := strconv.Atoi(parts[1])
	issued, err2 := strconv.ParseInt(parts[2], 10, 64)
	limit, err3 := strconv.Atoi(parts[3])
	if err1 != nil || err2 != nil || err3 != nil || next < 0 || limit < 1 {
		return token{}, bad
	}
	return token{stream: parts[0], next: next, issued: time.Unix(0, issued), max: limit}, nil
}
