package stream

import "math/bits"

// keyIndex is a map task's index of its keys: an open-addressing hash
// table, with linear probing, of positions in the task's pairs (see
// combined), which hold the keys, and hashes, which hold each key's hash.
// It is used instead of a Go map so that a record's key is hashed once:
// adding a missing key takes the probe that found it missing (a Go map
// takes a lookup, then an insert), the hash gives the key's bucket, and
// the reduce side looks keys up with the hash their map task computed.
type keyIndex struct {
	slots []keySlot // a power of two of them, at most 3/4 full
}

// A table of 2^k slots puts a key of hash h in slot h mod 2^k or the
// first empty one after it, and keeps the high 32 bits of h as its tag.
// The key's bucket is taken from those high bits too (see bucketOf), so
// the keys of one bucket spread over all the slots.

// keySlot is a slot of a keyIndex: pos is 1 + the position of its key, or
// 0 for an empty slot; tag is the high half of the key's hash, which
// rules out most other keys without reading them.
type keySlot struct {
	tag uint32
	pos int32
}

// reset empties x, with room for at least n keys.
//
// At most 3/4 full, not half: the table of a batch's few thousand keys is
// half the size then, to clear each batch and to keep in cache next to the
// pairs it points into, for a probe or two more on a miss.
func (x *keyIndex) reset(n int) {
	size := 1 << bits.Len(uint(max(4*n/3+1, 8)-1)) // at most 3/4 full
	if len(x.slots) >= size {
		clear(x.slots)
		return
	}
	x.slots = make([]keySlot, size)
}

// add puts the key at position pos, of hash h, in slot, as returned by
// combined.find, and grows x if it is then more than 3/4 full: the keys' hashes
// are in hashes, by position.
func (x *keyIndex) add(h uint64, pos int32, slot int, hashes []uint64) {
	x.slots[slot] = keySlot{tag: uint32(h >> 32), pos: pos + 1}
	if n := int(pos) + 1; 4*n > 3*len(x.slots) {
		x.fill(hashes[:n])
	}
}

// fill makes x the index of the keys whose hashes are hashes, by
// position, at most 3/4 full.
func (x *keyIndex) fill(hashes []uint64) {
	x.reset(len(hashes))
	for p, h := range hashes {
		x.slots[x.free(h)] = keySlot{tag: uint32(h >> 32), pos: int32(p) + 1}
	}
}

// free returns the first empty slot for a key of hash h.
func (x *keyIndex) free(h uint64) int {
	mask := uint64(len(x.slots) - 1)
	i := h & mask
	for x.slots[i].pos != 0 {
		i = (i + 1) & mask
	}
	return int(i)
}

// bucketOf returns the bucket, of par, of a key of hash h: from the high
// 32 bits of h, which the slots of a keyIndex do not depend on, so that
// the keys of one bucket spread over all the slots.
func bucketOf(h uint64, par int) int32 {
	return int32((h >> 32) * uint64(par) >> 32)
}
