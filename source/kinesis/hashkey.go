package kinesis

import (
	"cmp"
	"context"
	"crypto/md5"
	"encoding/binary"
	"log/slog"
	"math"
	"math/bits"
	"sync"

	"github.com/weirstream/weir/internal/kpl"
)

// hashKey is a Kinesis hash key: an unsigned 128-bit number.
type hashKey struct{ hi, lo uint64 }

func (a hashKey) cmp(b hashKey) int {
	if c := cmp.Compare(a.hi, b.hi); c != 0 {
		return c
	}
	return cmp.Compare(a.lo, b.lo)
}

// parseHashKey parses a decimal hash key, as ListShards returns them and
// the KPL writes explicit hash keys: digits only, at most 2^128-1.
func parseHashKey(s string) (hashKey, bool) {
	if s == "" {
		return hashKey{}, false
	}
	var k hashKey
	for i := range len(s) {
		d := s[i]
		if d < '0' || d > '9' {
			return hashKey{}, false
		}
		// k = k*10 + d, failing on overflow.
		carry, hi := bits.Mul64(k.hi, 10)
		if carry != 0 {
			return hashKey{}, false
		}
		loHi, lo := bits.Mul64(k.lo, 10)
		hi, c1 := bits.Add64(hi, loHi, 0)
		lo, c2 := bits.Add64(lo, uint64(d-'0'), 0)
		hi, c3 := bits.Add64(hi, c2, 0)
		if c1 != 0 || c3 != 0 {
			return hashKey{}, false
		}
		k = hashKey{hi, lo}
	}
	return k, true
}

// partitionHashKey is the hash key Kinesis gives a partition key: the MD5
// digest of its UTF-8 bytes, big-endian.
func partitionHashKey(partitionKey string) hashKey {
	sum := md5.Sum([]byte(partitionKey))
	return hashKey{binary.BigEndian.Uint64(sum[:8]), binary.BigEndian.Uint64(sum[8:])}
}

// hashRange is a shard's hash key range, both ends included.
type hashRange struct{ start, end hashKey }

// fullHashRange holds every hash key: nothing is outside it.
var fullHashRange = hashRange{end: hashKey{math.MaxUint64, math.MaxUint64}}

// parseHashRange parses a shard's hash key range as ListShards returns it.
func parseHashRange(start, end string) (hashRange, bool) {
	s, ok1 := parseHashKey(start)
	e, ok2 := parseHashKey(end)
	if !ok1 || !ok2 || s.cmp(e) > 0 {
		return hashRange{}, false
	}
	return hashRange{s, e}, true
}

// keep removes from urs, the user records of one KPL aggregate read from
// a shard whose range is r, those whose hash key is outside r, and returns
// the rest, in order, in urs's own array (it allocates nothing), and how
// many it removed. A user record's hash key is its explicit hash key when
// it has one, else the MD5 of its partition key, as the KCL computes it.
//
// Unlike the KCL, which drops the whole aggregate when any of its user
// records is outside (AggregatorUtil.deaggregate), keep removes only
// those: since KPL 0.15.11 the KPL puts again only the user records of an
// aggregate that landed on a shard whose range does not hold them, and
// counts the others as put (retrier.cc, succeed_if_correct_shard), so
// dropping them would lose them. An explicit hash key that is not a
// decimal number of at most 128 bits cannot be placed: its record is kept.
func (r hashRange) keep(urs []kpl.UserRecord) ([]kpl.UserRecord, int) {
	if r == fullHashRange {
		return urs, 0
	}
	kept := urs[:0]
	var lastKey string // the partition key last hashed, and its hash
	var lastHash hashKey
	hashed := false
	for _, ur := range urs {
		var k hashKey
		switch {
		case ur.ExplicitHashKey != "":
			var ok bool
			if k, ok = parseHashKey(ur.ExplicitHashKey); !ok {
				kept = append(kept, ur)
				continue
			}
		case hashed && ur.PartitionKey == lastKey: // aggregates often repeat a key
			k = lastHash
		default:
			k = partitionHashKey(ur.PartitionKey)
			lastKey, lastHash, hashed = ur.PartitionKey, k, true
		}
		if k.cmp(r.start) >= 0 && k.cmp(r.end) <= 0 {
			kept = append(kept, ur)
		}
	}
	clear(urs[len(kept):]) // keep no removed record's data alive
	return kept, len(urs) - len(kept)
}

// shardRanges caches the hash key ranges of listed shards, by stream (as
// configured or as a range names it) and shard. It is safe for concurrent
// use. A shard's range never changes, so entries never go stale.
type shardRanges struct {
	mu sync.Mutex
	m  map[[2]string]hashRange
}

// note caches the ranges of shards, listed from stream.
func (c *shardRanges) note(stream string, shards []shardInfo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[[2]string]hashRange)
	}
	for _, s := range shards {
		if r, ok := parseHashRange(s.StartingHashKey, s.EndingHashKey); ok {
			c.m[[2]string{stream, s.ID}] = r
		}
	}
}

func (c *shardRanges) get(stream, shard string) (hashRange, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.m[[2]string{stream, shard}]
	return r, ok
}

// hashRangeOf returns the hash key range of shard (fullHashRange with
// Config.KeepOutOfRangeRecords): the cached one, or the
// one a new listing of stream gives (each call at most maxAttempts times,
// 0: until ctx is done). A shard no listing shows with a valid range (a
// server that leaves it out) gets fullHashRange, so that its aggregates
// are delivered whole: the same on every read, first or recomputed, since
// a shard's range never changes.
func (r *Receiver) hashRangeOf(ctx context.Context, client Client, retry *retrier, stream, shard string, maxAttempts int, log *slog.Logger) (hashRange, error) {
	if r.cfg.KeepOutOfRangeRecords {
		return fullHashRange, nil
	}
	if hr, ok := r.ranges.get(stream, shard); ok {
		return hr, nil
	}
	shards, err := listShardsWith(ctx, client, retry, streamRef(stream), maxAttempts)
	if err != nil {
		return hashRange{}, err
	}
	r.ranges.note(stream, shards)
	if hr, ok := r.ranges.get(stream, shard); ok {
		return hr, nil
	}
	log.Warn("kinesis: no hash key range listed for the shard; its KPL aggregates are not filtered by range",
		"stream", stream, "shard", shard)
	return fullHashRange, nil
}
