package stream

import (
	"context"
	"sync"
)

// recomputed is a block of a recovered batch that the prefetcher recomputes
// ahead of the batch. The prefetcher sets recs and err, then closes done;
// after that only the batch runner uses it.
type recomputed struct {
	done chan struct{}
	recs any // the block's records: a []T of its source
	err  error
}

// prefetcher recomputes the blocks of the batches recovered from the log
// (those replayed for the state, then the pending ones) ahead of the batch
// runner, so that a restart reads the ranges of many blocks, and of many
// shards, at once instead of one block after the other. It starts them in
// batch order, then block order, at most Config.Parallelism at a time, and
// no further ahead than the batches the runner may have queued
// (maxPendingBatches past the one it runs): it holds no more records than
// the pipeline holds for its queued batches when it runs live. Each batch
// still applies its blocks in order, so its records are those of a
// sequential recomputation (G2).
type prefetcher struct {
	jobs   []*job // the recovered batches, in run order
	par    int
	window int // batches whose blocks may be recomputed: the running one and those queued after it

	mu      sync.Mutex
	ran     int           // recovered batches the runner is done with
	changed chan struct{} // closed and replaced when ran grows
}

// newPrefetcher plans the recomputation of the blocks of the recovered
// batches: for each batch, the blocks of the sources it reads (those an
// output reads, or, for a batch replayed for the state only, those a
// stateful operator reads). It returns nil when there is nothing to
// recompute. Called before the Run's goroutines start.
func (e *engine) newPrefetcher() *prefetcher {
	forOutputs, forState := e.sourcesRead()
	n := 0
	for _, j := range e.recovered {
		reads := forOutputs
		if j.replay {
			reads = forState
		}
		j.ahead = make([][]*recomputed, len(e.sources))
		for i, blocks := range j.blocks {
			if !reads[i] {
				continue
			}
			j.ahead[i] = make([]*recomputed, len(blocks))
			for b := range blocks {
				j.ahead[i][b] = &recomputed{done: make(chan struct{})}
			}
			n += len(blocks)
		}
	}
	if n == 0 {
		return nil
	}
	return &prefetcher{jobs: e.recovered, par: max(e.cfg.Parallelism, 1),
		window: e.cfg.maxPendingBatches + 1, changed: make(chan struct{})}
}

// sourcesRead tells, by source index, the sources an output reads and
// those a stateful operator reads.
func (e *engine) sourcesRead() (forOutputs, forState []bool) {
	nodes := make([]*node, 0, len(e.outputs))
	for _, o := range e.outputs {
		nodes = append(nodes, o.n)
	}
	return e.sourcesUnder(nodes), e.sourcesUnder(e.ticks)
}

// sourcesUnder tells, by source index, the sources that nodes are computed
// from.
func (e *engine) sourcesUnder(nodes []*node) []bool {
	seen := make(map[*node]bool)
	var mark func(n *node)
	mark = func(n *node) {
		if seen[n] {
			return
		}
		seen[n] = true
		for _, p := range n.parents {
			mark(p)
		}
	}
	for _, n := range nodes {
		mark(n)
	}
	out := make([]bool, len(e.sources))
	for i, s := range e.sources {
		out[i] = seen[s.graphNode()]
	}
	return out
}

// run recomputes the planned blocks until every one has started and
// returned, or ctx is done. A failure is kept for the batch that needs the
// block, which fails with it when it gets there, as it would have without
// prefetching.
func (p *prefetcher) run(ctx context.Context, sources []sourceRunner) {
	slots := make(chan struct{}, p.par)
	var wg sync.WaitGroup
	defer wg.Wait()
	for k, j := range p.jobs {
		if !p.await(ctx, k) {
			return
		}
		for i, fs := range j.ahead {
			for b, f := range fs {
				select {
				case slots <- struct{}{}:
				case <-ctx.Done():
					return
				}
				info, s := j.blocks[i][b], sources[i]
				wg.Go(func() {
					defer func() { <-slots }()
					f.err = safely(func() (err error) {
						f.recs, err = s.rebuild(ctx, info)
						return err
					})
					close(f.done)
				})
			}
		}
	}
}

// await waits until the runner is close enough to recovered batch k for its
// blocks to be recomputed. It reports false if ctx was done first.
func (p *prefetcher) await(ctx context.Context, k int) bool {
	for {
		p.mu.Lock()
		ready, changed := k < p.ran+p.window, p.changed
		p.mu.Unlock()
		if ready {
			return true
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return false
		}
	}
}

// finished is called by the runner after each recovered batch: it drops
// the batch's recomputed records, waiting for those still being recomputed
// (or ctx), and lets the prefetcher go one batch further.
func (p *prefetcher) finished(ctx context.Context, j *job) {
	for _, fs := range j.ahead {
		for _, f := range fs {
			select {
			case <-f.done:
				f.recs = nil
			case <-ctx.Done():
				return
			}
		}
	}
	p.mu.Lock()
	p.ran++
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
}
