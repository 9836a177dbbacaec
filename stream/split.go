package stream

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/weirstream/weir/source"
)

// ErrSplitState is wrapped, with ErrInvalidConfig, by the error Run and
// Validate return for a stateful operator (UpdateStateByKey, MapWithState,
// Window, ReduceByKeyAndWindow) whose records come from a source that shares
// its shards with other workers (a source.ShardSharer, such as a Kinesis
// receiver with Config.Leases) and are not declared partitioned by key
// (PartitionedByKey): each worker would keep the state of only the records
// it read, so a key read on several workers would get a partial state on
// each. The message names the operator, where it was declared, the source,
// and the fixes: repartition.ByKey, or PartitionedBy, keep the state per
// shard, one state per key across the fleet; PartitionedByKey and
// Config.AllowSplitState accept per-worker state.
var ErrSplitState = errors.New("stream: state would be split across workers")

// PartitionedByKey is an option of From: it declares that the source's
// records are partitioned by the key of the stateful operators that keep
// state of them, that is, every record of one key is read from the same
// shard. For Kinesis, that holds when the key is a function of the record's
// partition key (which picks its shard), as on a stream a repartition by key
// wrote. weir cannot check it: an operator between the source and the state
// that changes the key (a Map keying by another field) breaks it.
//
// It lets a stateful operator run on the records of a source that shares
// its shards with other workers, which Run otherwise refuses
// (ErrSplitState): each key's state is then kept by the one worker reading
// the key's shard. State is still per worker (DESIGN.md, "State per
// worker"): when a shard's lease moves to another worker, or the shard is
// split or merged, the new reader starts the shard's keys without their
// history. PartitionedBy, which says how keys are placed, keeps the state
// per shard instead, moving with the shard.
//
// Given to MapWithState, it declares the operator's own keys partitioned:
// every record of a key comes from one shard (a key that is the record's
// shard, as sink/kinesis's Deduplicate keeps its filters by). That
// operator alone is then accepted on a source sharing its shards; the
// stateful operators after it are checked as before. On a source keeping
// state per shard, the state of a key that is a shard's ID moves with the
// shard's lease; that of any other string key stays with its worker. Given to anything
// else, it makes Run refuse to start, as any option given to an operator
// that does not take it does (see Option).
func PartitionedByKey() Option {
	return func(o *options) { o.partitioned, o.given = true, o.given|optPartitionedByKey }
}

// keepState makes st the state of n, and records where the user's code
// declared the operator, for the errors that name it. It is called by the
// operator's function itself (UpdateStateByKey, ...), whose caller is the
// user's code.
func (n *node) keepState(st nodeState) {
	n.state = st
	if _, file, line, ok := runtime.Caller(2); ok {
		n.declared = fmt.Sprintf("%s:%d", filepath.Base(file), line)
	}
}

// splitProblemsLocked returns, unless Config.AllowSplitState, a problem
// wrapping ErrSplitState for every stateful operator that has, among its
// ancestors, a source sharing its shards with other workers on a path that
// goes through no node partitioned by key. p.mu is held.
func (p *Pipeline) splitProblemsLocked() []error {
	if p.cfg.AllowSplitState {
		return nil
	}
	shared := make(map[*node]string) // source node -> its description
	for i, s := range p.sources {
		if sh, ok := s.receiver().(source.ShardSharer); ok && sh.SharesShards() {
			shared[s.graphNode()] = fmt.Sprintf("source %d (%v)", i, s.component())
		}
	}
	if len(shared) == 0 {
		return nil
	}
	var problems []error
	for _, n := range p.nodes {
		if n.state == nil || n.keyedByShard {
			continue
		}
		srcs := splitSources(n, shared)
		if len(srcs) == 0 {
			continue
		}
		at := ""
		if n.declared != "" {
			at = ", declared at " + n.declared + ","
		}
		problems = append(problems, fmt.Errorf("%v%s keeps state across batches of %s, whose shards other workers share (leases): %w: "+
			"each worker would keep the state of the records it read, so a key read on several workers would get a partial state on each; "+
			"for one state per key, exact when leases move, repartition the records by key first (repartition.ByKey), "+
			"or, if the source's producers put each record with a function of its key as partition key, declare it with stream.PartitionedBy(pairs, partitionKey) before the operator: "+
			"the state is then kept per shard and moves with the shard's lease; "+
			"per-worker state, which a key loses when its shard's lease moves, is accepted with stream.PartitionedByKey() on the source's From or Config.AllowSplitState",
			n, at, strings.Join(srcs, " and "), ErrSplitState))
	}
	return problems
}

// splitSources returns the descriptions of the sharing sources (shared, by
// node) that reach n's input on a path through no node partitioned by key,
// in the order the walk finds them.
func splitSources(n *node, shared map[*node]string) []string {
	var srcs []string
	seen := make(map[*node]bool)
	var walk func(m *node)
	walk = func(m *node) {
		if seen[m] || m.partitioned {
			return
		}
		seen[m] = true
		if d, ok := shared[m]; ok {
			srcs = append(srcs, d)
		}
		for _, parent := range m.parents {
			walk(parent)
		}
	}
	for _, parent := range n.parents {
		walk(parent)
	}
	return srcs
}
