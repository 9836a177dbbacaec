package batch

import (
	"fmt"
	"strconv"
	"time"
)

// Time is the time of a batch: milliseconds since the Unix epoch, always a
// multiple of the batch interval. Batch times are the identity of a batch
// across restarts, so an output keyed by Time is exactly-once.
type Time int64

// TimeOf returns the batch Time of t, truncated to the millisecond.
func TimeOf(t time.Time) Time { return Time(t.UnixMilli()) }

// Std returns t as a time.Time in UTC.
func (t Time) Std() time.Time { return time.UnixMilli(int64(t)).UTC() }

// Add returns t+d, truncated to the millisecond.
func (t Time) Add(d time.Duration) Time { return t + Time(d.Milliseconds()) }

// Sub returns the duration t-u.
func (t Time) Sub(u Time) time.Duration { return time.Duration(t-u) * time.Millisecond }

// String formats t as milliseconds since the epoch followed by its UTC form,
// for example "1700000000000 ms (2023-11-14T22:13:20Z)".
func (t Time) String() string {
	return strconv.FormatInt(int64(t), 10) + " ms (" + t.Std().Format(time.RFC3339Nano) + ")"
}

// BlockID identifies a stored block. The driver assigns it when the block is
// pushed: Source is the index of the source in the pipeline (declaration
// order) and Seq counts the blocks of that source, continuing across restarts
// when a recovery log is configured, so an ID is never reused.
type BlockID struct {
	Source int    `json:"source"`
	Seq    uint64 `json:"seq"`
}

// String returns the ID as "block-<source>-<seq>".
func (id BlockID) String() string {
	return "block-" + strconv.Itoa(id.Source) + "-" + strconv.FormatUint(id.Seq, 10)
}

// Compare orders IDs by source, then sequence: -1, 0 or +1.
func (id BlockID) Compare(o BlockID) int {
	switch {
	case id.Source != o.Source:
		if id.Source < o.Source {
			return -1
		}
		return 1
	case id.Seq < o.Seq:
		return -1
	case id.Seq > o.Seq:
		return 1
	}
	return 0
}

// SeqRange is a range of records read from one shard of one stream: from First
// to Last, both inclusive, Count records. First and Last are sequence numbers
// (decimal strings of up to 128 bits; compare them with CompareSeq). A block
// records one SeqRange for every batch of records added to it, so it can be
// rebuilt by re-reading exactly those ranges.
type SeqRange struct {
	Stream string `json:"stream"`
	Shard  string `json:"shard"`
	First  string `json:"first"`
	Last   string `json:"last"`
	Count  int    `json:"count"`
}

// Validate reports whether r is well formed: stream and shard named, First and
// Last valid sequence numbers with First <= Last, and Count >= 1.
func (r SeqRange) Validate() error {
	switch {
	case r.Stream == "":
		return fmt.Errorf("batch: range %v: empty stream name", r)
	case r.Shard == "":
		return fmt.Errorf("batch: range %v: empty shard id", r)
	case r.Count < 1:
		return fmt.Errorf("batch: range %v: count %d, must be >= 1", r, r.Count)
	}
	if err := ValidateSeq(r.First); err != nil {
		return fmt.Errorf("batch: range %v: first: %w", r, err)
	}
	if err := ValidateSeq(r.Last); err != nil {
		return fmt.Errorf("batch: range %v: last: %w", r, err)
	}
	if CompareSeq(r.First, r.Last) > 0 {
		return fmt.Errorf("batch: range %v: first is after last", r)
	}
	return nil
}

// String formats r as "stream/shard[first..last]#count".
func (r SeqRange) String() string {
	return r.Stream + "/" + r.Shard + "[" + r.First + ".." + r.Last + "]#" + strconv.Itoa(r.Count)
}

// BlockInfo describes a stored block: its ID, the ranges its records came
// from in the order they were added, and its number of records. A BlockInfo
// is everything needed to recompute the block's records from its source.
type BlockInfo struct {
	ID     BlockID    `json:"id"`
	Ranges []SeqRange `json:"ranges,omitempty"`
	Count  int        `json:"count"`
}
