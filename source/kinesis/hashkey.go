package kinesis

import (
	"context"
	"github.com/weirstream/weir/internal/hashkey"
	"log/slog"
	"sync"

	"github.com/weirstream/weir/internal/kpl"
)

// hashKey and hashRange are Kinesis hash keys and a shard's range of them.
type (
	hashKey   = hashkey.Key
	hashRange = hashkey.Range
)

// fullHashRange holds every hash key: nothing is outside it.
var fullHashRange = hashkey.Full

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
func keepInRange(r hashRange, urs []kpl.UserRecord) ([]kpl.UserRecord, int) {
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
			if k, ok = hashkey.Parse(ur.ExplicitHashKey); !ok {
				kept = append(kept, ur)
				continue
			}
		case hashed && ur.PartitionKey == lastKey: // aggregates often repeat a key
			k = lastHash
		default:
			k = hashkey.Of(ur.PartitionKey)
			lastKey, lastHash, hashed = ur.PartitionKey, k, true
		}
		if r.Contains(k) {
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
		if r, ok := hashkey.ParseRange(s.StartingHashKey, s.EndingHashKey); ok {
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
