package origin

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// Window is how far, in records of one batch, a writer may run ahead of the
// first record it has not yet seen acknowledged: the record at index m is
// sent only when every record with an index of m-Window or less has been
// written. So a reader that has seen index m of a batch has already seen, in
// the same shard, every earlier copy of an index of m-Window or less that
// belongs to the shard, and a Filter needs to remember only the last Window
// indexes. It is part of the tag's format (version 1).
const Window = 8192

// DefaultMaxWriters is the number of writers a Filter made with
// NewFilter(0) remembers.
const DefaultMaxWriters = 64

// errState is wrapped by the error UnmarshalBinary returns.
var errState = errors.New("origin: bad filter state")

// stateVersion is the first byte of a Filter's encoding: 2 adds the
// origin shards of version 2 tags after the writers; UnmarshalBinary reads
// 1 too.
const stateVersion = 2

// words is the number of 64-bit words of a writer's bitmap.
const words = Window / 64

// Filter drops the records a reader has already seen, by their tag. For
// version 2 tags it keeps, per origin shard, the highest range start seen
// and the positions seen at or above it (see keepV2; at most MaxPositions),
// at most as many origin shards as NewFilter was given writers, the least
// recently seen forgotten first. For version 1 tags it keeps, per writer, the latest batch time, the greatest index seen of that
// batch and a bitmap of the last Window indexes: about 1 KiB per writer, and
// at most the number of writers NewFilter was given, the least recently seen
// one forgotten first. A forgotten writer's records are all kept until it is
// seen again: duplicates, never losses. A Filter belongs to one reading
// shard, is not safe for concurrent use, and its state is encoded by
// MarshalBinary, to be snapshotted with the shard's other state.
type Filter struct {
	max     int
	writers map[string]*writerState
	shards  map[shardKey]*shardState
	tick    uint64
}

// writerState is what a Filter remembers of one writer.
type writerState struct {
	batch int64
	high  uint64        // greatest index seen of batch
	seen  [words]uint64 // bit i%Window: index i in (high-Window, high] seen
	used  uint64        // Filter.tick when last seen, for eviction
}

// NewFilter returns an empty Filter that remembers up to maxWriters writers
// of version 1 tags and as many origin shards of version 2 tags
// (DefaultMaxWriters if maxWriters <= 0).
func NewFilter(maxWriters int) *Filter {
	if maxWriters <= 0 {
		maxWriters = DefaultMaxWriters
	}
	return &Filter{max: maxWriters, writers: make(map[string]*writerState), shards: make(map[shardKey]*shardState)}
}

// Keep reports whether the record tagged t is to be delivered, and
// remembers it: false only for a record the Filter has proof it has seen.
// Records must be given in the order of their shard.
//
// A record of a batch older than the writer's latest is kept: a writer
// finishes a batch before it starts the next, so such a record comes from
// another writer using the same name, and nothing proves it a copy.
func (f *Filter) Keep(t Tag) bool {
	f.tick++
	if t.v2() {
		return f.keepV2(t)
	}
	w := f.writers[t.Writer]
	switch {
	case w == nil:
		w = f.add(t.Writer)
		w.batch, w.high = t.Batch, t.Index
		w.set(t.Index)
		return true
	case t.Batch > w.batch:
		*w = writerState{batch: t.Batch, high: t.Index, used: f.tick}
		w.set(t.Index)
		return true
	case t.Batch < w.batch:
		return true
	}
	w.used = f.tick
	x := t.Index
	switch {
	case x > w.high:
		w.slide(x)
		w.set(x)
		return true
	case w.high >= Window && x <= w.high-Window:
		return false
	case w.isSet(x):
		return false
	}
	w.set(x)
	return true
}

// add makes room for and returns a new writer's state.
func (f *Filter) add(name string) *writerState {
	if len(f.writers) >= f.max {
		var oldest string
		var at uint64
		for n, w := range f.writers {
			if oldest == "" || w.used < at {
				oldest, at = n, w.used
			}
		}
		delete(f.writers, oldest)
	}
	w := &writerState{used: f.tick}
	f.writers[name] = w
	return w
}

func (w *writerState) set(i uint64)        { w.seen[i/64%words] |= 1 << (i % 64) }
func (w *writerState) isSet(i uint64) bool { return w.seen[i/64%words]&(1<<(i%64)) != 0 }

// slide moves high up to x, forgetting the indexes that leave the window.
func (w *writerState) slide(x uint64) {
	if x-w.high >= Window {
		w.seen = [words]uint64{}
	} else {
		for i := w.high + 1; i <= x; i++ {
			w.seen[i/64%words] &^= 1 << (i % 64)
		}
	}
	w.high = x
}

// MarshalBinary encodes the Filter's state: the writers, least recently
// seen first, each with its batch, greatest index and the non-zero words
// of its bitmap; then the origin shards, least recently seen first, each
// with its range start and positions.
func (f *Filter) MarshalBinary() ([]byte, error) {
	names := slices.SortedFunc(maps.Keys(f.writers), func(a, b string) int {
		return cmp.Compare(f.writers[a].used, f.writers[b].used)
	})
	b := []byte{stateVersion}
	b = binary.AppendUvarint(b, uint64(f.max))
	b = binary.AppendUvarint(b, uint64(len(names)))
	for _, n := range names {
		w := f.writers[n]
		b = binary.AppendUvarint(b, uint64(len(n)))
		b = append(b, n...)
		b = binary.AppendVarint(b, w.batch)
		b = binary.AppendUvarint(b, w.high)
		nz := 0
		for _, v := range w.seen {
			if v != 0 {
				nz++
			}
		}
		b = binary.AppendUvarint(b, uint64(nz))
		for i, v := range w.seen {
			if v != 0 {
				b = binary.AppendUvarint(b, uint64(i))
				b = binary.LittleEndian.AppendUint64(b, v)
			}
		}
	}
	return f.appendShards(b), nil
}

// UnmarshalBinary replaces the Filter's state with the one data encodes, as
// MarshalBinary wrote it. On error the Filter is left unchanged.
func (f *Filter) UnmarshalBinary(data []byte) error {
	r := reader{b: data}
	v := r.byte()
	if v != 1 && v != stateVersion {
		return fmt.Errorf("%w: version %d, want 1 or %d", errState, v, stateVersion)
	}
	maxW, n := r.uvarint(), r.uvarint()
	if r.err == nil && (maxW == 0 || maxW > 1<<20 || n > maxW) {
		return fmt.Errorf("%w: %d writers of at most %d", errState, n, maxW)
	}
	writers := make(map[string]*writerState, min(n, uint64(len(data))))
	for i := uint64(0); i < n && r.err == nil; i++ {
		l := r.uvarint()
		if l > MaxWriterLen {
			return fmt.Errorf("%w: writer name of %d bytes", errState, l)
		}
		name := string(r.bytes(int(l)))
		w := &writerState{batch: r.varint(), high: r.uvarint(), used: i + 1}
		nz := r.uvarint()
		if nz > words {
			return fmt.Errorf("%w: %d bitmap words", errState, nz)
		}
		for range nz {
			at := r.uvarint()
			if at >= words {
				return fmt.Errorf("%w: bitmap word %d", errState, at)
			}
			w.seen[at] = binary.LittleEndian.Uint64(r.bytes(8))
		}
		if _, dup := writers[name]; dup {
			return fmt.Errorf("%w: writer %q twice", errState, name)
		}
		writers[name] = w
	}
	shards := make(map[shardKey]*shardState)
	if v >= 2 && r.err == nil {
		var err error
		if shards, err = readShards(&r, maxW, n); err != nil {
			return err
		}
	}
	if r.err == nil && len(r.b) > 0 {
		r.err = fmt.Errorf("%d bytes after the end", len(r.b))
	}
	if r.err != nil {
		return fmt.Errorf("%w: %w", errState, r.err)
	}
	f.max, f.writers, f.shards, f.tick = int(maxW), writers, shards, n+uint64(len(shards))
	return nil
}

// reader reads the fields of an encoded Filter; its first error sticks.
type reader struct {
	b   []byte
	err error
}

var errShort = errors.New("cut short")

func (r *reader) byte() byte {
	if b := r.bytes(1); len(b) == 1 {
		return b[0]
	}
	return 0
}

func (r *reader) bytes(n int) []byte {
	if r.err != nil || n > len(r.b) {
		r.err = cmp.Or(r.err, errShort)
		return make([]byte, n)
	}
	b := r.b[:n]
	r.b = r.b[n:]
	return b
}

func (r *reader) uvarint() uint64 { return readVarint(r, binary.Uvarint) }
func (r *reader) varint() int64   { return readVarint(r, binary.Varint) }

// readVarint reads one varint with decode (binary.Uvarint or Varint).
func readVarint[V uint64 | int64](r *reader, decode func([]byte) (V, int)) V {
	if r.err != nil {
		return 0
	}
	v, k := decode(r.b)
	if k <= 0 {
		r.err = errShort
		return 0
	}
	r.b = r.b[k:]
	return v
}
