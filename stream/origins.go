package stream

import (
	"context"
	"fmt"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/source"
)

// Origins is an option of ForEachBatch: the batches given to its function
// carry the origin of each record (batch.Batch.Origins), the source record
// it was made of, which sink/kinesis writes as an origin tag so that a
// pipeline reading its stream drops copies exactly, whichever worker wrote
// them. A record has an origin when the source's records know their
// position (source.Positioned: weir's Kinesis receiver's do) and only
// narrow operators (Map, Filter, FlatMap, MapBatch) lie between the source
// and the output: a keyed, window, state, Transform or Union operator
// makes records of many source records, and a batch after one has no
// origins. The cost: the output's chain of operators runs record by
// record, so MapBatch sees parts of one record, and for this output alone:
// the narrow operators of a stream it shares with other outputs run once
// for it and once for them (a keyed operator's result, which has no
// origins, is computed once). With Quarantine, the letter of a record of such a
// batch that the function fails on (see RecordErrors) names the record's
// origin: its stream, shard, sequence and sub-sequence numbers (see
// DeadLetter's Range); a record without origin names none, as without
// Origins.
func Origins() Option {
	return func(o *options) { o.origins, o.given = true, o.given|optOrigins }
}

// tracer is what a chain of narrow operators run for origins (see
// parted.traced) tells its consumer, per partition: the origin of the
// source record whose outputs are being yielded, and how many source
// records were yielded so far.
type tracer struct {
	cur []batch.Origin
	n   []int
}

// traced is parted's each while an output collects origins: it yields the
// source records of partition i one at a time, each after setting its
// origin in tr. In the quarantine pass (pt.iso holds an isolation) it
// turns the failure of each into a letter, as isolated does, and goes on.
func (pt *parted[T]) traced(tr *tracer, i int, yield func(int, []T) bool) bool {
	k := pt.keys[i]
	var iso *isolation
	if pt.iso != nil {
		iso = pt.iso.Load()
	}
	for _, c := range pt.data[i] {
		for j := range c.recs {
			tr.cur[i] = batch.Origin{}
			if k.shard != "" {
				seq, sub := any(&c.recs[j]).(source.Positioned).Position()
				tr.cur[i] = batch.Origin{Stream: k.stream, Shard: k.shard, Seq: seq, SubSeq: sub}
			}
			tr.n[i]++
			one := c.recs[j : j+1 : j+1]
			if iso == nil {
				if !yield(c.pos, one) {
					return false
				}
				continue
			}
			if !pt.try(iso, i, tr.n[i]-1, c.pos, one, yield) {
				return false
			}
		}
	}
	return true
}

// originBatch returns the batch of s at r's time with its records'
// origins, computed from the source's partitions for this output alone
// (see run.tracing), or s's batch without origins if it has none (see
// Origins).
func originBatch[T any](r *run, s *Stream[T]) (*batch.Batch[T], error) {
	pt, err := tracedParts(r, s, false)
	if err != nil || pt == nil {
		return nil, err
	}
	if pt.trace == nil {
		return s.at(r)
	}
	return collectOrigins(r, s, pt, nil)
}

// isolatedOriginBatch is isolatedBatch for an output with Origins: the
// batch of the records whose processing did not fail, with their origins,
// which are those a run without failure gives them, and a letter for each
// of the others.
func isolatedOriginBatch[T any](r *run, s *Stream[T]) (*batch.Batch[T], []DeadLetter) {
	pt, err := tracedParts(r, s, true)
	if err != nil || pt == nil {
		return nil, nil
	}
	if pt.trace == nil {
		return isolatedBatch(r, s)
	}
	iso := &isolation{}
	r.iso.Store(iso)
	defer r.iso.Store(nil)
	b, err := collectOrigins(r, s, pt, iso)
	if err != nil {
		return nil, nil
	}
	return b, iso.letters
}

// tracedParts plans s for an output with Origins (see run.tracing), and
// for its quarantine pass if isolating is set (see fusedAgain).
func tracedParts[T any](r *run, s *Stream[T], isolating bool) (*parted[T], error) {
	r.tracing, r.isolating = true, isolating
	defer func() { r.tracing, r.isolating = false, false }() // planning may call user code
	return s.parts(r)
}

// collectOrigins runs the partitions of pt, s's planned with origins, and
// returns their batch with the origin of each record. With iso, the run's
// isolation (the quarantine pass), the partitions run one at a time, on
// this goroutine, and the outputs of a source record that fails are
// dropped: the batch holds the others', numbered as without the failure.
func collectOrigins[T any](r *run, s *Stream[T], pt *parted[T], iso *isolation) (*batch.Batch[T], error) {
	n := len(pt.keys)
	tr := &tracer{cur: make([]batch.Origin, n), n: make([]int, n)}
	type part struct {
		chunks  []chunk[T]
		origins [][]batch.Origin // per chunk
		// last is the source record (tr.n) whose outputs were taken last,
		// and fan how many of them: they are the last chunk's last.
		last, fan int
	}
	parts := make([]part, n)
	par := r.par
	if iso != nil {
		par = 1
		iso.drop = func(i int) {
			p := &parts[i]
			if p.last != tr.n[i] || p.fan == 0 {
				return
			}
			k := len(p.chunks) - 1
			left := len(p.chunks[k].recs) - p.fan
			p.chunks[k].recs, p.origins[k] = p.chunks[k].recs[:left], p.origins[k][:left]
			if left == 0 {
				p.chunks, p.origins = p.chunks[:k], p.origins[:k]
			}
			p.fan = 0
		}
	}
	if !pt.trace.CompareAndSwap(nil, tr) {
		return nil, fmt.Errorf("stream: %v: origins collected twice at once", s.n)
	}
	defer pt.trace.Store(nil)
	err := parallel(r.ctx, par, n, func(_ context.Context, i int) error {
		p := &parts[i]
		pt.each(i, func(pos int, recs []T) bool {
			if len(recs) == 0 {
				return true
			}
			if k := len(p.chunks) - 1; k < 0 || p.chunks[k].pos != pos {
				p.chunks = append(p.chunks, chunk[T]{pos: pos})
				p.origins = append(p.origins, nil)
			}
			k := len(p.chunks) - 1
			p.chunks[k].recs = append(p.chunks[k].recs, recs...)
			for range recs {
				if tr.n[i] != p.last {
					p.last, p.fan = tr.n[i], 0
				}
				o := tr.cur[i]
				if o.Seq != "" {
					o.Index = p.fan
				}
				p.fan++
				p.origins[k] = append(p.origins[k], o)
			}
			return true
		})
		return nil
	})
	if err != nil {
		return nil, err
	}
	// The order of parted.batch: chunks by position, then partition.
	byPos := make([][]int, pt.npos) // partition of each chunk, with its index below
	at := make([][]int, pt.npos)
	total := 0
	for i, p := range parts {
		for k, c := range p.chunks {
			byPos[c.pos] = append(byPos[c.pos], i)
			at[c.pos] = append(at[c.pos], k)
			total += len(c.recs)
		}
	}
	recs := make([][]T, 0, len(parts))
	origins := make([]batch.Origin, 0, total)
	for pos, is := range byPos {
		for x, i := range is {
			k := at[pos][x]
			recs = append(recs, parts[i].chunks[k].recs)
			origins = append(origins, parts[i].origins[k]...)
		}
	}
	return batch.New(pt.time, pt.blocks, recs...).WithOrigins(origins), nil
}
