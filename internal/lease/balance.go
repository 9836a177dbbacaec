package lease

import (
	"math/rand/v2"

	"github.com/weirstream/weir/internal/checkpointer"
)

// leaseView is a lease as one take cycle sees it.
type leaseView struct {
	Lease
	// expired: the counter has not changed for a lease duration, as observed
	// on this worker's clock.
	expired bool
}

// takePlan decides which leases one take cycle of worker me tries to take,
// in KCL's way:
//
//   - only leases not at checkpointer.ShardEnd count, and a lease whose parents' leases
//     are not all at checkpointer.ShardEnd (or gone) is never taken;
//   - the alive workers are me and the owners of unexpired leases; the
//     target is ceil(leases / workers), capped by maxLeases if > 0;
//   - take back, whatever the target, every lease the table names mine that
//     I do not hold (a previous run of this worker, a take whose answer was
//     lost, a lease lost on my clock only): every other worker counts it as
//     mine and never takes it;
//   - below target, take unowned and expired leases, up to the target;
//   - if there are none, steal towards balance (stealPlan): one lease at a
//     time from the most loaded worker while it holds two more than me, up
//     to floor(leases / workers), or to target from a worker above target,
//     at most maxSteals (0: no bound; < 0: never).
//
// held is the set of shards I hold; listed, the shards of the last shard
// list (nil if none was given). The order of the result is random, so
// that workers starting together do not all race for the same lease.
func takePlan(me string, views []leaseView, held map[string]bool, listed map[string]bool, maxSteals, maxLeases int) []Lease {
	parentsDone := parentsDoneIn(views, listed)
	workers, active, target := targetOf(me, views, maxLeases)
	own, needed := ownAndNeeded(me, views, held, parentsDone, target)
	if needed <= 0 {
		return own
	}
	var free []Lease
	for _, v := range views {
		if takeable(me, v, held, parentsDone) {
			free = append(free, v.Lease)
		}
	}
	if len(free) > 0 {
		rand.Shuffle(len(free), func(i, j int) { free[i], free[j] = free[j], free[i] })
		return append(own, free[:min(needed, len(free))]...)
	}
	floor := min(active/len(workers), target)
	return append(own, stealPlan(me, views, held, workers, floor, target, target-needed, maxSteals)...)
}

// parentsDoneIn returns whether the parents of a lease among views are
// done, so that it may be taken. A parent is done at SHARD_END. A parent
// without a lease is done if its lease was deleted as finished (a child
// has begun) or it is not listed (past retention); a listed parent whose
// lease is gone while no child began was deleted before it finished: the
// shard sync creates it again, and its children wait.
func parentsDoneIn(views []leaseView, listed map[string]bool) func(Lease) bool {
	byShard := make(map[string]leaseView, len(views))
	childBegun := make(map[string]bool) // parent -> a lease naming it a parent has begun
	for _, v := range views {
		byShard[v.Shard] = v
		if hasBegun(v.Lease) {
			for _, p := range v.Parents {
				childBegun[p] = true
			}
		}
	}
	return func(l Lease) bool {
		for _, p := range l.Parents {
			pv, ok := byShard[p]
			switch {
			case ok && pv.Checkpoint != checkpointer.ShardEnd:
				return false
			case !ok && listed[p] && !childBegun[p]:
				return false
			}
		}
		return true
	}
}

// targetOf returns the alive workers (me and the owners of unexpired
// leases) with the active leases (not at SHARD_END) each holds, me's
// counted as 0, the number of active leases and me's target:
// ceil(active / workers), capped by maxLeases if > 0.
func targetOf(me string, views []leaseView, maxLeases int) (workers map[string]int, active, target int) {
	workers = map[string]int{me: 0}
	for _, v := range views {
		if v.Checkpoint == checkpointer.ShardEnd {
			continue
		}
		active++
		if v.Owner != "" && !v.expired && v.Owner != me {
			workers[v.Owner]++
		}
	}
	target = (active + len(workers) - 1) / len(workers)
	if maxLeases > 0 && target > maxLeases {
		target = maxLeases
	}
	return workers, active, target
}

// ownAndNeeded returns the leases the table names me's but me does not
// hold (taken back whatever the target: every other worker counts them as
// mine and never takes them; a take whose answer was lost, a lease lost on
// my clock only) and how many more me takes below target. A held lease
// that another worker asked me for (its owner, me its checkpointOwner: a
// hand-off under way) counts as the asker's, as every worker counts it
// (targetOf), not as mine too: counted twice, it kept me at my target
// while the asker counted it as well, and a lease freed then (the drain of
// a third worker) was taken by neither of us until a periodic scan, since
// nothing calls for a scan when the hand-off ends.
func ownAndNeeded(me string, views []leaseView, held map[string]bool, parentsDone func(Lease) bool, target int) (own []Lease, needed int) {
	mine := len(held)
	for _, v := range views {
		if v.Owner == me && v.CheckpointOwner == "" && v.Checkpoint != checkpointer.ShardEnd && !held[v.Shard] && parentsDone(v.Lease) {
			own = append(own, v.Lease)
		}
		if held[v.Shard] && v.Owner != "" && v.Owner != me && v.CheckpointOwner == me {
			mine-- // being handed off: the asker's
		}
	}
	return own, target - mine - len(own)
}

// takeable reports whether a take cycle of a worker below its target
// takes v (free): unowned or expired, not at SHARD_END, not held by me,
// its parents done.
func takeable(me string, v leaseView, held map[string]bool, parentsDone func(Lease) bool) bool {
	return v.Checkpoint != checkpointer.ShardEnd && !held[v.Shard] && v.Owner != me &&
		(v.Owner == "" || v.expired) && parentsDone(v.Lease)
}

// stealPlan picks the leases to steal towards balance, one at a time from
// the alive worker holding the most, while it holds at least two more than
// me: up to floor (the fewest leases a balanced worker holds) from any such
// worker, and up to target only from one above target, at most maxSteals
// (0: no bound; < 0: never). A victim is never left with fewer than me, and
// one cycle takes the whole deficit, spread over the busiest workers, rather
// than one lease (the KCL's default): a worker that joins a fleet is
// balanced within two take cycles. Thieves that steal at once cannot see
// each other's steals; stopping at floor unless a victim holds more than
// target keeps them from draining one below it.
func stealPlan(me string, views []leaseView, held map[string]bool, workers map[string]int, floor, target, mine, maxSteals int) []Lease {
	if maxSteals < 0 {
		return nil
	}
	counts := make(map[string]int, len(workers))
	for w, n := range workers {
		if w != me {
			counts[w] = n
		}
	}
	// The leases that can be stolen from each worker: not under hand-off
	// (CheckpointOwner), not at their end, not expired, none I hold (a
	// worker that was paused may still believe it holds a lease another
	// worker took meanwhile: its reader must stop first, when the loss is
	// seen). A worker whose leases are all under hand-off is no victim:
	// picking it would plan nothing, and the thief would wait for its next
	// full scan.
	stealable := make(map[string][]Lease)
	for _, v := range views {
		if counts[v.Owner] > 0 && !v.expired && v.CheckpointOwner == "" && v.Checkpoint != checkpointer.ShardEnd && !held[v.Shard] {
			stealable[v.Owner] = append(stealable[v.Owner], v.Lease)
		}
	}
	want := make(map[string]int) // victim -> leases to steal from it
	for n := 0; maxSteals == 0 || n < maxSteals; n++ {
		victim, most := "", 0
		for w, c := range counts {
			if want[w] >= len(stealable[w]) {
				continue
			}
			if c > most || c == most && w < victim {
				victim, most = w, c
			}
		}
		if victim == "" || most-mine < 2 || mine >= target || mine >= floor && most <= target {
			break
		}
		counts[victim]--
		want[victim]++
		mine++
	}
	var out []Lease
	for victim, n := range want {
		theirs := stealable[victim]
		rand.Shuffle(len(theirs), func(i, j int) { theirs[i], theirs[j] = theirs[j], theirs[i] })
		out = append(out, theirs[:n]...)
	}
	return out
}
