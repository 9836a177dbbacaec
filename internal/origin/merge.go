package origin

import (
	"maps"

	"github.com/weirstream/weir/batch"
)

// MergeFrom adds to f what g has seen, so that f drops every record either
// would have dropped: the Filter of a shard made by a reshard starts from
// its parents' (a split's children from their parent's, a merge's child
// from both), since a record written to a parent may be written again, as
// a copy, to the child. g is not changed.
//
// Version 2: per origin shard, the higher range start and the positions
// either has seen at or above it (a writer starts a range only once every
// record of the origin shard before it was written, wherever it went).
// Version 1: per writer, the later batch; of the same batch, the union of
// the indexes seen within the window of the greater one. Past the Filter's
// bounds the least recently seen are forgotten, as Keep does: duplicates,
// never losses.
func (f *Filter) MergeFrom(g *Filter) {
	for k, gs := range g.shards {
		fs := f.shards[k]
		if fs == nil {
			fs = f.addShard(k)
			fs.start = gs.start
		}
		if batch.CompareSeq(gs.start, fs.start) > 0 {
			fs.start = gs.start
		}
		maps.Copy(fs.seen, gs.seen)
		for p := range fs.seen {
			if batch.CompareSeq(p.seq, fs.start) < 0 {
				delete(fs.seen, p)
			}
		}
		if len(fs.seen) > MaxPositions {
			fs.forget()
		}
	}
	for name, gw := range g.writers {
		fw := f.writers[name]
		switch {
		case fw == nil || gw.batch > fw.batch:
			if fw == nil {
				fw = f.add(name)
			}
			used := fw.used
			*fw = *gw
			fw.used = used
		case gw.batch == fw.batch:
			w := *gw
			if w.high > fw.high {
				fw.slide(w.high)
			} else {
				w.slide(fw.high)
			}
			for i := range fw.seen {
				fw.seen[i] |= w.seen[i]
			}
		}
	}
}
