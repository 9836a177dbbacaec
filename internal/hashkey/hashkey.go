// Package hashkey holds Kinesis hash keys: the unsigned 128-bit numbers
// Kinesis maps a partition key to (the MD5 digest of its UTF-8 bytes,
// big-endian) and of which each shard holds a range. The Kinesis receiver
// places KPL user records with them; the stream package keeps the state of
// each shard's keys with them. PartitionKeyLen measures a partition key as
// Kinesis does against its limit.
package hashkey

import (
	"cmp"
	"crypto/md5"
	"encoding/binary"
	"math"
	"math/big"
	"math/bits"
	"unicode/utf16"
)

// Key is a Kinesis hash key: Hi holds the high 64 bits, Lo the low.
type Key struct{ Hi, Lo uint64 }

// Cmp compares a and b as numbers: -1, 0 or +1.
func (a Key) Cmp(b Key) int {
	if c := cmp.Compare(a.Hi, b.Hi); c != 0 {
		return c
	}
	return cmp.Compare(a.Lo, b.Lo)
}

// Parse parses a decimal hash key, as ListShards returns them and the KPL
// writes explicit hash keys: digits only, at most 2^128-1.
func Parse(s string) (Key, bool) {
	if s == "" {
		return Key{}, false
	}
	var k Key
	for i := range len(s) {
		d := s[i]
		if d < '0' || d > '9' {
			return Key{}, false
		}
		// k = k*10 + d, failing on overflow.
		carry, hi := bits.Mul64(k.Hi, 10)
		if carry != 0 {
			return Key{}, false
		}
		loHi, lo := bits.Mul64(k.Lo, 10)
		hi, c1 := bits.Add64(hi, loHi, 0)
		lo, c2 := bits.Add64(lo, uint64(d-'0'), 0)
		hi, c3 := bits.Add64(hi, c2, 0)
		if c1 != 0 || c3 != 0 {
			return Key{}, false
		}
		k = Key{hi, lo}
	}
	return k, true
}

// Of returns the hash key Kinesis gives a partition key: the MD5 digest of
// its UTF-8 bytes, big-endian.
func Of(partitionKey string) Key {
	sum := md5.Sum([]byte(partitionKey))
	return Key{binary.BigEndian.Uint64(sum[:8]), binary.BigEndian.Uint64(sum[8:])}
}

// Range is a shard's hash key range, both ends included.
type Range struct{ Start, End Key }

// Full holds every hash key.
var Full = Range{End: Key{math.MaxUint64, math.MaxUint64}}

// ParseRange parses a shard's hash key range as ListShards returns it.
func ParseRange(start, end string) (Range, bool) {
	s, ok1 := Parse(start)
	e, ok2 := Parse(end)
	if !ok1 || !ok2 || s.Cmp(e) > 0 {
		return Range{}, false
	}
	return Range{s, e}, true
}

// Contains reports whether k is in r.
func (r Range) Contains(k Key) bool { return k.Cmp(r.Start) >= 0 && k.Cmp(r.End) <= 0 }

// String returns k in decimal, as ListShards writes hash keys.
func (k Key) String() string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], k.Hi)
	binary.BigEndian.PutUint64(b[8:], k.Lo)
	return new(big.Int).SetBytes(b[:]).String()
}

// MaxPartitionKeyLen is the longest partition key Kinesis takes, in the
// units PartitionKeyLen counts.
const MaxPartitionKeyLen = 256

// PartitionKeyLen returns the length of a partition key as Kinesis checks
// it against its 256 characters: in UTF-16 code units, so a character
// outside the Basic Multilingual Plane (an emoji) counts twice. kinesalite,
// whose validation mirrors Kinesis's, refuses a key of 256 such characters.
func PartitionKeyLen(key string) int {
	n := 0
	for _, r := range key {
		n += utf16.RuneLen(r)
	}
	return n
}
