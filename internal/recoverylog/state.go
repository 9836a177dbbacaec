package recoverylog

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/recovery"
)

// ShardKey names a shard of a stream.
type ShardKey struct {
	Stream string
	Shard  string
}

// PendingBatch is a batch that was allocated but not completed: after a
// restart it is recomputed with exactly these blocks, in this order.
type PendingBatch struct {
	Time   batch.Time
	Blocks []batch.BlockInfo
	// InRun reports a batch of a run of empty batches (EmptyRun): it holds
	// no block, and its completion is not logged (a later entry says it).
	InRun bool
}

// IDs returns the IDs of the batch's blocks, in order.
func (p PendingBatch) IDs() []batch.BlockID {
	ids := make([]batch.BlockID, len(p.Blocks))
	for i, b := range p.Blocks {
		ids[i] = b.ID
	}
	return ids
}

// Progress is how far a pipeline got: the facts a restart needs even about
// batches and blocks that are done with. A Summary entry carries it across
// compaction, and State embeds it.
type Progress struct {
	// LastCompleted is the greatest time of a completed batch; it is only
	// meaningful when HasCompleted is true.
	LastCompleted batch.Time
	// HasCompleted reports whether any batch has completed.
	HasCompleted bool
	// NextBlockSeq is, per source index, one more than the greatest block
	// Seq ever logged for it: where the source's block numbering resumes,
	// so that no block ID is reused. A source absent from the map has
	// logged no block; its numbering starts at 0.
	NextBlockSeq map[int]uint64
	// ShardSeqs is, per shard, the greatest sequence number (the Last of a
	// range) of any block ever logged: where a shard's reader resumes. A
	// shard logged finished (ShardFinished) is left out: no reader resumes
	// it. A compacted log keeps it in summary entries of at most 500
	// shards each.
	ShardSeqs map[ShardKey]string
	// ReservedThrough is the greatest batch time reserved for batches the
	// log holds no entry of (BatchesReserved), or 0 if none was.
	ReservedThrough batch.Time
}

// State is what a restart needs to know, computed from a log by Recover.
type State struct {
	Progress
	// Shape is the last pipeline shape recorded, or nil if none was.
	Shape *recovery.Shape
	// Pending are the batches allocated but not completed, in time order.
	// The driver recomputes each with exactly its blocks before cutting new
	// batches.
	Pending []PendingBatch
	// Unallocated are the blocks stored but not allocated to any batch, in
	// ID order. They go into the next batch.
	Unallocated []batch.BlockInfo
	// Snapshot is the last state snapshot recorded (SnapshotTaken), or nil
	// if none was.
	Snapshot *SnapshotRef
	// Replay are the batches completed after Snapshot's time, in time
	// order, each with its blocks: a restart recomputes them from their
	// ranges to bring the state from the snapshot up to the last completed
	// batch, without running their outputs again. It is empty when no
	// snapshot was recorded: a log without state forgets completed batches.
	Replay []PendingBatch
	// Runs are the runs of empty batches (EmptyRun) that hold a batch of
	// Replay or Pending, in log order: compaction keeps them.
	Runs []Run
}

// Run is a run of empty batches (EmptyRun): the batch times From,
// From+Every, ... up to Through, but those that hold blocks.
type Run struct {
	From, Through batch.Time
	Every         time.Duration
}

// completeThrough records that every batch up to t completed, if t is not
// 0: the empty batches of runs up to t are no longer pending, and are kept
// for a replay if there is a snapshot, as completed batches are.
func (s *State) completeThrough(t batch.Time) {
	if t == 0 {
		return
	}
	if !s.HasCompleted || s.LastCompleted < t {
		s.LastCompleted, s.HasCompleted = t, true
	}
	var done []PendingBatch
	s.Pending = slices.DeleteFunc(s.Pending, func(p PendingBatch) bool {
		if !p.InRun || p.Time > t {
			return false
		}
		done = append(done, p)
		return true
	})
	if s.Snapshot != nil && len(done) > 0 {
		s.Replay = append(s.Replay, done...)
		slices.SortStableFunc(s.Replay, func(a, b PendingBatch) int { return cmp.Compare(a.Time, b.Time) })
	}
}

// release gives back the batch times reserved after t (see
// Log.CompactReleasing): no reservation and no run of empty batches
// reaches past t, and the batches of runs after t are no longer pending.
func (s *State) release(t batch.Time) {
	s.ReservedThrough = min(s.ReservedThrough, t)
	runs := s.Runs[:0]
	for _, r := range s.Runs {
		if r.From <= t {
			r.Through = min(r.Through, t)
			runs = append(runs, r)
		}
	}
	s.Runs = runs
	s.Pending = slices.DeleteFunc(s.Pending, func(p PendingBatch) bool { return p.InRun && p.Time > t })
}

// SnapshotRef names the snapshot of the state after the batch at Time: Ref
// is what the log's SnapshotStore returned for it, "" for the empty state.
type SnapshotRef struct {
	Time batch.Time
	Ref  string
}

// Load reads log and returns the State its entries recover to: the usual
// first call of a driver that has opened a log.
func Load(ctx context.Context, log *Log) (*State, error) {
	entries, err := log.Read(ctx)
	if err != nil {
		return nil, err
	}
	return Recover(entries)
}

// Recover computes the State of a log from its entries, in append order. It
// returns an error wrapping recovery.ErrInconsistent, naming the entry and
// the fix (restore the log, or delete it), if the entries contradict each
// other:
//   - a block stored twice with different contents, or stored again after
//     the batch holding it completed;
//   - a batch allocated with a block that was never stored, that is in
//     another batch, or whose batch completed;
//   - a batch allocated twice with different blocks, or at a time not after
//     the last completed batch (batch times must increase);
//   - a batch completed that is not allocated or already completed.
//
// An entry that repeats one still in effect (the same block stored, the same
// allocation) is accepted and has no further effect, so a log holding a
// retried append recovers like one without. A batch kept for replay (see
// State.Replay) is still in effect too: its blocks, its allocation and its
// completion may be repeated, unchanged. A compaction that a crash cut short
// can leave a log's entries followed by a prefix of State.Entries, which
// repeats every entry in effect, those batches included; such a log
// recovers to the same State (see Log.Compact).
func Recover(entries []Entry) (*State, error) {
	r := newRecoverer()
	for i, e := range entries {
		if err := r.apply(e); err != nil {
			return nil, fmt.Errorf("%w: entries[%d] (%v): %w; the log cannot be replayed: restore it from a backup, "+
				"or delete it to start fresh (its pending batches will then not be recomputed)", recovery.ErrInconsistent, i, e, err)
		}
	}
	return r.state(), nil
}

// LastBatch returns the greatest batch time the log knows of, of a batch
// pending or completed or reserved (BatchesReserved, EmptyRun), and whether there is
// one: a restarting driver cuts its next batch after it.
func (s *State) LastBatch() (batch.Time, bool) {
	t, ok := s.LastCompleted, s.HasCompleted
	if n := len(s.Pending); n > 0 && (!ok || s.Pending[n-1].Time > t) {
		t, ok = s.Pending[n-1].Time, true
	}
	if s.ReservedThrough != 0 && (!ok || s.ReservedThrough > t) {
		t, ok = s.ReservedThrough, true
	}
	return t, ok
}

// Entries returns the shortest log that recovers to s: the shape, then each
// pending batch's blocks and its allocation, then the unallocated blocks,
// then a summary of the progress. With a snapshot, the snapshot and the
// batches to replay after it (blocks, allocation, completion) come after the
// shape, and a shard logged finished that their blocks name is logged
// finished again after the blocks. Compaction replaces a log with these. Each of them repeats an entry
// in effect, so the log s was recovered from, followed by any prefix of them
// (what a compaction a crash cut short may leave), still recovers to s.
func (s *State) Entries() []Entry {
	var out []Entry
	if s.Shape != nil {
		out = append(out, ShapeRecorded(cloneShape(*s.Shape)))
	}
	if s.Snapshot != nil {
		out = append(out, SnapshotTaken(s.Snapshot.Time, s.Snapshot.Ref))
	}
	for _, p := range s.Replay {
		if p.InRun {
			continue // in a run below
		}
		out = append(append(out, Allocation(p.Time, p.Blocks)...), BatchCompleted(p.Time))
	}
	for _, r := range s.Runs {
		out = append(out, EmptyRun(r.From, r.Through, r.Every))
	}
	for _, p := range s.Pending {
		if p.InRun {
			continue
		}
		out = append(out, Allocation(p.Time, p.Blocks)...)
	}
	for _, b := range s.Unallocated {
		out = append(out, BlockStored(b))
	}
	out = append(out, s.finishedIn(out)...)
	if s.HasCompleted || len(s.NextBlockSeq) > 0 || len(s.ShardSeqs) > 0 || s.ReservedThrough != 0 {
		out = append(out, s.Progress.summaries()...)
	}
	return out
}

// MaxAllocBlocks is the most blocks a batch's allocation entry
// (BatchAllocated) names: a larger batch is logged block by block
// (Allocation), so that no entry outgrows what a DynamoDB log stores in an
// item. A block's ID takes about 25 bytes of the entry, at most 42: 4,096
// take at most 172 KB of its 380 KB.
const MaxAllocBlocks = 4096

// AllocatesByBlock reports whether a batch of blocks, in this order, is
// logged block by block (BlockStoredIn) rather than by an allocation entry:
// if it holds more than MaxAllocBlocks blocks, in ID order (the order the
// driver gives a batch), which BlockStoredIn keeps.
func AllocatesByBlock(blocks []batch.BlockInfo) bool {
	return len(blocks) > MaxAllocBlocks && slices.IsSortedFunc(blocks, func(a, b batch.BlockInfo) int { return a.ID.Compare(b.ID) })
}

// Allocation returns the entries recording that blocks are stored and that
// they, in this order, are the batch at t: each block's BlockStored and
// BatchAllocated, or, if AllocatesByBlock, each block's BlockStoredIn and
// no allocation entry. Both recover to the same batch, and a log that
// holds the batch already recovers to the same state after any prefix of
// either (a compaction a crash cut short).
func Allocation(t batch.Time, blocks []batch.BlockInfo) []Entry {
	out := make([]Entry, 0, len(blocks)+1)
	byID := AllocatesByBlock(blocks)
	for _, b := range blocks {
		if byID {
			out = append(out, BlockStoredIn(b, t))
		} else {
			out = append(out, BlockStored(b))
		}
	}
	if !byID {
		out = append(out, BatchAllocated(t, PendingBatch{Blocks: blocks}.IDs()...))
	}
	return out
}

// finishedIn returns the ShardFinished entries of the shards that the block
// entries of entries name and s.ShardSeqs does not: those logged finished
// after their blocks, which a batch kept for a replay still holds, so that
// the log Entries makes forgets them too.
func (s *State) finishedIn(entries []Entry) []Entry {
	var out []Entry
	seen := make(map[ShardKey]bool)
	for _, e := range entries {
		if e.Kind != KindBlockStored {
			continue
		}
		for _, r := range e.Block.Ranges {
			k := ShardKey{Stream: r.Stream, Shard: r.Shard}
			if _, ok := s.ShardSeqs[k]; !ok && !seen[k] {
				seen[k] = true
				out = append(out, ShardFinished(k.Stream, k.Shard))
			}
		}
	}
	return out
}

// maxSummaryShards is the most shards one summary entry holds: at most
// about 400 bytes each (a 128-character stream name and shard ID, a
// sequence number, JSON), so that an entry stays well within what a
// DynamoDB log stores in one item.
const maxSummaryShards = 500

// summaries returns the summary entries of p: one, or for more than
// maxSummaryShards shards several, which Recover merges, the first holding
// everything but the shards beyond the first maxSummaryShards.
func (p Progress) summaries() []Entry {
	keys := slices.SortedFunc(maps.Keys(p.ShardSeqs), compareShardKeys)
	first := p.clone()
	var out []Entry
	for i := 0; i == 0 || i < len(keys); i += maxSummaryShards {
		part := first
		if i > 0 {
			part = Progress{NextBlockSeq: map[int]uint64{}}
		}
		part.ShardSeqs = make(map[ShardKey]string, min(maxSummaryShards, len(keys)-i))
		for _, k := range keys[i:min(i+maxSummaryShards, len(keys))] {
			part.ShardSeqs[k] = p.ShardSeqs[k]
		}
		out = append(out, Entry{Kind: KindSummary, Summary: part})
	}
	return out
}

func compareShardKeys(a, b ShardKey) int {
	return cmp.Or(cmp.Compare(a.Stream, b.Stream), cmp.Compare(a.Shard, b.Shard))
}

func cloneShape(s recovery.Shape) recovery.Shape {
	return recovery.Shape{Sources: slices.Clone(s.Sources), Outputs: slices.Clone(s.Outputs)}
}

func (p Progress) clone() Progress {
	p.NextBlockSeq = maps.Clone(p.NextBlockSeq)
	p.ShardSeqs = maps.Clone(p.ShardSeqs)
	return p
}

// recoverer folds entries into the live blocks and batches of a log.
type recoverer struct {
	prog     Progress
	shape    *recovery.Shape
	blocks   map[batch.BlockID]batch.BlockInfo // stored, batch not completed
	owner    map[batch.BlockID]batch.Time      // allocated blocks -> batch
	pending  map[batch.Time][]batch.BlockID
	consumed map[batch.BlockID]bool // blocks of completed batches
	snap     *SnapshotRef
	done     map[batch.Time][]batch.BlockInfo  // completed after snap, to replay
	kept     map[batch.BlockID]batch.BlockInfo // the blocks of done's batches
	keptIn   map[batch.BlockID]batch.Time      // the batch of each of them
	runs     []Run                             // runs of empty batches, in log order
	runDone  batch.Time                        // every batch up to it completed: the last run's or reservation's start (From), less 1 ms
}

func newRecoverer() *recoverer {
	return &recoverer{
		prog: Progress{
			NextBlockSeq: make(map[int]uint64),
			ShardSeqs:    make(map[ShardKey]string),
		},
		blocks:   make(map[batch.BlockID]batch.BlockInfo),
		owner:    make(map[batch.BlockID]batch.Time),
		pending:  make(map[batch.Time][]batch.BlockID),
		consumed: make(map[batch.BlockID]bool),
		done:     make(map[batch.Time][]batch.BlockInfo),
		kept:     make(map[batch.BlockID]batch.BlockInfo),
		keptIn:   make(map[batch.BlockID]batch.Time),
	}
}

func (r *recoverer) apply(e Entry) error {
	if err := e.Validate(); err != nil {
		return err
	}
	switch e.Kind {
	case KindBlockStored:
		if err := r.store(e.Block); err != nil || e.Batch == 0 {
			return err
		}
		return r.join(e.Batch, e.Block.ID)
	case KindBatchAllocated:
		return r.allocate(e.Time, e.Blocks)
	case KindBatchCompleted:
		return r.complete(e.Time)
	case KindShape:
		s := cloneShape(e.Shape)
		r.shape = &s
	case KindSummary:
		r.fold(e.Summary)
	case KindSnapshot:
		return r.snapshot(e.Time, e.Ref)
	case KindBatchesReserved:
		r.fold(Progress{ReservedThrough: e.Time})
		if e.From != 0 {
			r.runDone = max(r.runDone, e.From-1)
		}
	case KindEmptyRun:
		run := Run{From: e.Time, Through: e.Through, Every: e.Every}
		if !slices.Contains(r.runs, run) {
			r.runs = append(r.runs, run)
		}
		r.runDone = max(r.runDone, e.Time-1)
		r.fold(Progress{ReservedThrough: e.Through})
	case KindShardFinished:
		// No reader starts on the shard again (see ShardFinished); a
		// block of it logged later would bring it back.
		delete(r.prog.ShardSeqs, e.Shard)
	}
	return nil
}

// snapshot makes the snapshot at t current and forgets the completed
// batches it covers.
func (r *recoverer) snapshot(t batch.Time, ref string) error {
	if r.snap != nil && t < r.snap.Time {
		return fmt.Errorf("snapshot at %v recorded after the one at %v; snapshot times must not decrease", t, r.snap.Time)
	}
	r.snap = &SnapshotRef{Time: t, Ref: ref}
	for bt, infos := range r.done {
		if bt <= t {
			for _, b := range infos {
				delete(r.kept, b.ID)
				delete(r.keptIn, b.ID)
			}
			delete(r.done, bt)
		}
	}
	return nil
}

func (r *recoverer) store(b batch.BlockInfo) error {
	if old, ok := r.blocks[b.ID]; ok {
		if !sameBlock(old, b) {
			return fmt.Errorf("block %v stored twice with different contents", b.ID)
		}
		return nil
	}
	if r.consumed[b.ID] {
		if old, ok := r.kept[b.ID]; ok && sameBlock(old, b) {
			return nil // a block of a batch kept for replay, repeated
		}
		return fmt.Errorf("block %v stored again after the batch holding it completed", b.ID)
	}
	b.Ranges = slices.Clone(b.Ranges)
	r.blocks[b.ID] = b
	next := r.prog.NextBlockSeq
	next[b.ID.Source] = max(next[b.ID.Source], b.ID.Seq+1)
	for _, rg := range b.Ranges {
		k := ShardKey{rg.Stream, rg.Shard}
		r.prog.ShardSeqs[k] = batch.MaxSeq(r.prog.ShardSeqs[k], rg.Last)
	}
	return nil
}

func sameBlock(a, b batch.BlockInfo) bool {
	return a.ID == b.ID && a.Count == b.Count && slices.Equal(a.Ranges, b.Ranges)
}

// join puts the stored block id in the batch at t (BlockStoredIn): the
// batch is pending from its first block on, and holds its blocks in ID
// order.
func (r *recoverer) join(t batch.Time, id batch.BlockID) error {
	if r.consumed[id] {
		// store accepted it: a block of a batch kept for replay, repeated.
		if bt, ok := r.keptIn[id]; ok && bt == t {
			return nil
		}
		return fmt.Errorf("block %v logged in batch %v, but it is in a batch that completed", id, t)
	}
	if o, ok := r.owner[id]; ok {
		if o != t {
			return fmt.Errorf("block %v logged in batch %v, but it is in batch %v", id, t, o)
		}
		return nil
	}
	ids, ok := r.pending[t]
	if !ok {
		if err := r.allocatable(t); err != nil {
			return err
		}
	}
	i, _ := slices.BinarySearchFunc(ids, id, batch.BlockID.Compare)
	r.pending[t] = slices.Insert(ids, i, id)
	r.owner[id] = t
	return nil
}

// allocatable reports why a batch at t cannot become pending: its time is
// not after the last completed batch's.
func (r *recoverer) allocatable(t batch.Time) error {
	if _, ok := r.done[t]; ok || (r.prog.HasCompleted && t <= r.prog.LastCompleted) {
		return fmt.Errorf("batch %v allocated after batch %v completed; batch times must increase",
			t, r.prog.LastCompleted)
	}
	return nil
}

// allocate records the batch at t with blocks ids. A batch pending already
// may be allocated again with the same blocks, or with more when the
// blocks logged in it (join) are among them, in the order ids gives.
func (r *recoverer) allocate(t batch.Time, ids []batch.BlockID) error {
	old, pending := r.pending[t]
	if pending {
		if slices.Equal(old, ids) {
			return nil
		}
		for _, id := range old {
			if !slices.Contains(ids, id) {
				return fmt.Errorf("batch %v allocated twice with different blocks: %v, then %v", t, old, ids)
			}
		}
	}
	if infos, ok := r.done[t]; ok && slices.Equal(PendingBatch{Blocks: infos}.IDs(), ids) {
		return nil // a batch kept for replay, allocated again as it was
	}
	if !pending {
		if err := r.allocatable(t); err != nil {
			return err
		}
	}
	for _, id := range ids {
		if o, ok := r.owner[id]; ok && o == t {
			continue // logged in this batch (join)
		}
		if r.consumed[id] {
			return fmt.Errorf("block %v is in a batch that already completed", id)
		}
		if _, ok := r.blocks[id]; !ok {
			return fmt.Errorf("block %v was never stored", id)
		}
		if o, ok := r.owner[id]; ok {
			return fmt.Errorf("block %v is already in batch %v", id, o)
		}
	}
	for _, id := range ids {
		r.owner[id] = t
	}
	r.pending[t] = slices.Clone(ids)
	return nil
}

func (r *recoverer) complete(t batch.Time) error {
	ids, ok := r.pending[t]
	if !ok {
		if _, kept := r.done[t]; kept {
			return nil // a batch kept for replay, completed again
		}
		return fmt.Errorf("batch %v completed but it is not allocated, or already completed", t)
	}
	var infos []batch.BlockInfo
	if r.snap != nil && t > r.snap.Time {
		infos = make([]batch.BlockInfo, 0, len(ids))
		for _, id := range ids {
			infos = append(infos, r.blocks[id])
		}
		r.done[t] = infos
		for _, b := range infos {
			r.kept[b.ID] = b
			r.keptIn[b.ID] = t
		}
	}
	for _, id := range ids {
		delete(r.blocks, id)
		delete(r.owner, id)
		r.consumed[id] = true
	}
	delete(r.pending, t)
	r.fold(Progress{LastCompleted: t, HasCompleted: true})
	return nil
}

// fold merges p into r's progress, keeping the greater of each value.
func (r *recoverer) fold(p Progress) {
	if p.HasCompleted && (!r.prog.HasCompleted || p.LastCompleted > r.prog.LastCompleted) {
		r.prog.LastCompleted, r.prog.HasCompleted = p.LastCompleted, true
	}
	r.prog.ReservedThrough = max(r.prog.ReservedThrough, p.ReservedThrough)
	for src, next := range p.NextBlockSeq {
		r.prog.NextBlockSeq[src] = max(r.prog.NextBlockSeq[src], next)
	}
	for k, seq := range p.ShardSeqs {
		r.prog.ShardSeqs[k] = batch.MaxSeq(r.prog.ShardSeqs[k], seq)
	}
}

// completedThrough returns the time up to which every batch completed, or
// 0: the last completion, snapshot, or start of a run or of reserved times
// logged by a stateful pipeline's batch runner (less 1 ms).
func (r *recoverer) completedThrough() batch.Time {
	t := r.runDone
	if r.prog.HasCompleted {
		t = max(t, r.prog.LastCompleted)
	}
	if r.snap != nil {
		t = max(t, r.snap.Time)
	}
	return t
}

func (r *recoverer) state() *State {
	s := &State{Progress: r.prog, Shape: r.shape}
	if r.snap != nil {
		snap := *r.snap
		s.Snapshot = &snap
	}
	for _, t := range slices.Sorted(maps.Keys(r.done)) {
		s.Replay = append(s.Replay, PendingBatch{Time: t, Blocks: r.done[t]})
	}
	for _, t := range slices.Sorted(maps.Keys(r.pending)) {
		p := PendingBatch{Time: t, Blocks: make([]batch.BlockInfo, 0, len(r.pending[t]))}
		for _, id := range r.pending[t] {
			p.Blocks = append(p.Blocks, r.blocks[id])
		}
		s.Pending = append(s.Pending, p)
	}
	r.emptyBatches(s)
	if r.runDone > 0 && (!s.HasCompleted || s.LastCompleted < r.runDone) {
		// Every batch up to it completed, as an entry compaction drops
		// may be all that says so (a reservation's From).
		s.LastCompleted, s.HasCompleted = r.runDone, true
	}
	for id, b := range r.blocks {
		if _, ok := r.owner[id]; !ok {
			s.Unallocated = append(s.Unallocated, b)
		}
	}
	slices.SortFunc(s.Unallocated, func(a, b batch.BlockInfo) int { return a.ID.Compare(b.ID) })
	return s
}

// emptyBatches adds the batches of the runs of empty batches to s: those
// completed after the snapshot to Replay (none without a snapshot, as for
// batches with blocks), the others to Pending, each in time order, and the
// runs that hold one of them to Runs. A time that holds blocks is not
// empty, and one in two runs is one batch.
func (r *recoverer) emptyBatches(s *State) {
	done := r.completedThrough()
	forgot := done // the batches up to it are needed no more
	if r.snap != nil {
		forgot = r.snap.Time
	}
	seen := make(map[batch.Time]bool)
	var replay, pending []PendingBatch
	for _, run := range r.runs {
		if run.Through <= forgot {
			continue
		}
		s.Runs = append(s.Runs, run)
		for t := run.From; t <= run.Through; t = t.Add(run.Every) {
			_, allocated := r.pending[t]
			_, completed := r.done[t]
			if t <= forgot || allocated || completed || seen[t] {
				continue
			}
			seen[t] = true
			if t <= done {
				replay = append(replay, PendingBatch{Time: t, InRun: true})
			} else {
				pending = append(pending, PendingBatch{Time: t, InRun: true})
			}
		}
	}
	byTime := func(a, b PendingBatch) int { return cmp.Compare(a.Time, b.Time) }
	if len(replay) > 0 {
		s.Replay = append(s.Replay, replay...)
		slices.SortStableFunc(s.Replay, byTime)
	}
	if len(pending) > 0 {
		s.Pending = append(s.Pending, pending...)
		slices.SortStableFunc(s.Pending, byTime)
	}
}

// wireSummary is the JSON form of a summary entry's Progress, with its maps as sorted lists
// so that the encoding is deterministic and readable.
type wireSummary struct {
	LastCompleted *batch.Time    `json:"lastCompleted,omitempty"`
	Reserved      *batch.Time    `json:"reserved,omitempty"`
	NextBlockSeq  []wireBlockSeq `json:"nextBlockSeq,omitempty"`
	ShardSeqs     []wireShardSeq `json:"shardSeqs,omitempty"`
}

type wireBlockSeq struct {
	Source int    `json:"source"`
	Next   uint64 `json:"next"`
}

type wireShardSeq struct {
	Stream string `json:"stream"`
	Shard  string `json:"shard"`
	Seq    string `json:"seq"`
}

func (p Progress) wire() *wireSummary {
	w := &wireSummary{}
	if p.HasCompleted {
		t := p.LastCompleted
		w.LastCompleted = &t
	}
	if p.ReservedThrough != 0 {
		t := p.ReservedThrough
		w.Reserved = &t
	}
	for _, src := range slices.Sorted(maps.Keys(p.NextBlockSeq)) {
		w.NextBlockSeq = append(w.NextBlockSeq, wireBlockSeq{Source: src, Next: p.NextBlockSeq[src]})
	}
	keys := slices.SortedFunc(maps.Keys(p.ShardSeqs), compareShardKeys)
	for _, k := range keys {
		w.ShardSeqs = append(w.ShardSeqs, wireShardSeq{Stream: k.Stream, Shard: k.Shard, Seq: p.ShardSeqs[k]})
	}
	return w
}

func (w *wireSummary) summary() Progress {
	p := Progress{NextBlockSeq: make(map[int]uint64), ShardSeqs: make(map[ShardKey]string)}
	if w.LastCompleted != nil {
		p.LastCompleted, p.HasCompleted = *w.LastCompleted, true
	}
	if w.Reserved != nil {
		p.ReservedThrough = *w.Reserved
	}
	for _, s := range w.NextBlockSeq {
		p.NextBlockSeq[s.Source] = max(p.NextBlockSeq[s.Source], s.Next)
	}
	for _, s := range w.ShardSeqs {
		k := ShardKey{s.Stream, s.Shard}
		p.ShardSeqs[k] = batch.MaxSeq(p.ShardSeqs[k], s.Seq)
	}
	return p
}

func (p Progress) validate() error {
	var problems []error
	for src := range p.NextBlockSeq {
		if src < 0 {
			problems = append(problems, fmt.Errorf("next block seq of source %d: source must be >= 0", src))
		}
	}
	for k, seq := range p.ShardSeqs {
		if k.Stream == "" || k.Shard == "" {
			problems = append(problems, fmt.Errorf("shard seq of %q/%q: empty stream or shard", k.Stream, k.Shard))
		}
		if err := batch.ValidateSeq(seq); err != nil {
			problems = append(problems, fmt.Errorf("shard seq of %s/%s: %w", k.Stream, k.Shard, err))
		}
	}
	return errors.Join(problems...)
}
