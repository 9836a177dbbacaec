// Package kinesismetrics adapts a Kinesis receiver and its DynamoDB lease
// table to package metrics, whose Collector depends on neither: metrics
// defines what it reads, and this package, which imports both sides, reads
// it. Pass kinesismetrics.Receiver(r) in metrics.Config.Receivers and
// kinesismetrics.Leases(ctx, leaseConfig) as metrics.Config.Leases.
package kinesismetrics

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/internal/lease"
	"github.com/weirstream/weir/metrics"
	"github.com/weirstream/weir/source/kinesis"
)

// Receiver returns r as a metrics.Receiver named by its stream
// (kinesis.Config.Stream as given). A nil r (kinesis.New's, when its error
// went unchecked) gives nil, which metrics.New refuses, naming it.
func Receiver(r *kinesis.Receiver) metrics.Receiver {
	if r == nil {
		return nil
	}
	return receiver{r}
}

type receiver struct{ r *kinesis.Receiver }

// Name returns the stream r reads.
func (a receiver) Name() string { return a.r.StreamName() }

// Stats returns r's counters, checkpoints and leases in metrics' types.
func (a receiver) Stats() metrics.ReceiverStats {
	st := a.r.Stats()
	cp := a.r.CheckpointStats()
	held := a.r.HeldLeases()
	out := metrics.ReceiverStats{
		WorkerID:         a.r.WorkerID(),
		RecordsRead:      st.RecordsRead,
		Retries:          st.Retries, // every cause, from 0
		RangesRecomputed: st.RangesRecomputed,
		RangesSkipped:    st.RangesSkipped,
		Shards:           make(map[string]metrics.ShardStats, len(st.Shards)),
	}
	leased := make(map[string]string, len(held)) // shard: checkpoint when taken
	for _, l := range held {
		out.Held = append(out.Held, l.Shard)
		leased[l.Shard] = l.Checkpoint
	}
	bounds := kinesis.GetRecordsBounds()
	for id, s := range st.Shards {
		h := metrics.Histogram{Bounds: bounds, Counts: s.GetRecordsLatency, Sum: s.GetRecordsTime}
		out.Shards[id] = metrics.ShardStats{
			Reading: s.Reading, Ended: s.Ended, Drained: s.Drained,
			RecordsRead: s.RecordsRead, BytesRead: s.BytesRead,
			Behind:    msToDuration(s.MillisBehindLatest),
			LastAdded: s.LastAdded, LatestCompleted: s.LatestCompleted,
			ReadLatency: h, Retries: s.Retries, HandedBack: s.HandedBack,
		}
	}
	for id, c := range cp.Shards {
		s := out.Shards[id]
		s.Checkpointed, s.Checkpoint = c.Registered, c.Committed
		s.CheckpointCommits, s.CheckpointFailures = c.Commits, c.Failures
		out.Shards[id] = s
	}
	for id, taken := range leased {
		// Before its first commit, the checkpointer knows only a sequence
		// number found in the lease, not TRIM_HORIZON or LATEST.
		if s := out.Shards[id]; s.Checkpoint == "" {
			s.Checkpoint = taken
			out.Shards[id] = s
		}
	}
	return out
}

// msToDuration returns ms milliseconds as a Duration.
func msToDuration(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }

// Leases returns a metrics.LeaseLister of the lease table cfg names: the
// same leasetable.Config as the receivers' Config.Leases, with TableName
// set (the receiver's default, its App, is not known here) and, for the
// default client, AWS (the receiver's Config.AWS is not known here
// either). Only the table and client settings are used. It returns an error
// wrapping leasetable.ErrInvalidConfig for a bad name or endpoint, or one
// loading the default AWS configuration; it makes no call to the table.
func Leases(ctx context.Context, cfg leasetable.Config) (metrics.LeaseLister, error) {
	t, err := lease.OpenTable(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("kinesismetrics: %w", err)
	}
	return leases{t}, nil
}

type leases struct{ t *lease.Table }

// List lists the table's leases in metrics' type. It returns the leases it
// could read, in a non-nil slice, together with an error naming the items
// it could not (each a *leasetable.BadItemError); nil and the error if the
// table could not be scanned.
func (a leases) List(ctx context.Context) ([]metrics.Lease, error) {
	ls, err := a.t.List(ctx)
	if err != nil && !errors.Is(err, leasetable.ErrBadItem) {
		return nil, err
	}
	out := make([]metrics.Lease, len(ls))
	for i, l := range ls {
		out[i] = metrics.Lease{
			Shard: l.Shard, Owner: l.Owner, Worker: stableWorker(l.Owner),
			Counter: l.Counter, Checkpoint: l.Checkpoint, Parents: l.Parents,
		}
	}
	return out, err
}

// defaultIDSuffix matches what the default leasetable.Config.WorkerID appends to the host
// name: the process ID and 8 random hex digits, new at every start.
var defaultIDSuffix = regexp.MustCompile(`:[0-9]+:[0-9a-f]{8}$`)

// stableWorker returns owner without the suffix of a default worker ID, so
// that a restarted worker keeps its metric label; an ID the user set is
// kept whole.
func stableWorker(owner string) string {
	return defaultIDSuffix.ReplaceAllString(owner, "")
}
