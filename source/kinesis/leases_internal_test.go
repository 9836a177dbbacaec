package kinesis

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/internal/checkpointer"
	"github.com/weirstream/weir/internal/lease"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/source"
)

func TestLeasePosition(t *testing.T) {
	ts := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	weir := func(seq string) lease.Lease { return lease.Lease{Checkpoint: seq, WeirCheckpoint: seq} }
	tests := []struct {
		name    string
		lease   lease.Lease
		initial InitialPosition
		resume  string // Runtime.ResumeAfter's answer; "" means none
		want    position
	}{
		{"weir's checkpoint", weir("100"), Latest, "", position{After: "100"}},
		{"KCL checkpoint", lease.Lease{Checkpoint: "100"}, Latest, "", position{At: "100", AtCheckpoint: true}},
		{"KCL checkpoint after weir's", lease.Lease{Checkpoint: "200", WeirCheckpoint: "100"}, Latest, "", position{At: "200", AtCheckpoint: true}},
		{"KCL inside weir's record", lease.Lease{Checkpoint: "100", WeirCheckpoint: "100", SubSequence: 2}, Latest, "", position{At: "100", AtSubSequence: 2, AtCheckpoint: true}},
		{"KCL inside an aggregate", lease.Lease{Checkpoint: "100", SubSequence: 3}, Latest, "", position{At: "100", AtSubSequence: 3, AtCheckpoint: true}},
		{"trim horizon", lease.Lease{Checkpoint: checkpointer.TrimHorizon}, Latest, "", position{Initial: TrimHorizon}},
		{"latest", lease.Lease{Checkpoint: checkpointer.LatestPosition}, TrimHorizon, "", position{Initial: Latest}},
		{"latest pinned by a take", lease.Lease{Checkpoint: checkpointer.LatestPosition, LatestAt: ts}, Latest, "", position{Initial: AtTimestamp, Timestamp: ts}},
		{"log beats a pinned latest", lease.Lease{Checkpoint: checkpointer.LatestPosition, LatestAt: ts}, Latest, "7", position{After: "7"}},
		{"at timestamp", lease.Lease{Checkpoint: checkpointer.AtTimestamp}, AtTimestamp, "", position{Initial: AtTimestamp, Timestamp: ts}},
		{"no checkpoint", lease.Lease{}, TrimHorizon, "", position{Initial: TrimHorizon}},
		{"log ahead of checkpoint, compared as numbers", weir("99"), Latest, "100", position{After: "100"}},
		{"log behind checkpoint, compared as numbers", weir("100"), Latest, "99", position{After: "100"}},
		{"log equal to checkpoint", weir("100"), Latest, "100", position{After: "100"}},
		{"log covers the KCL record", lease.Lease{Checkpoint: "100"}, Latest, "100", position{After: "100"}},
		{"log covers the aggregate", lease.Lease{Checkpoint: "100", SubSequence: 2}, Latest, "100", position{After: "100"}},
		{"log behind the aggregate", lease.Lease{Checkpoint: "100", SubSequence: 2}, Latest, "99", position{At: "100", AtSubSequence: 2, AtCheckpoint: true}},
		{"log beats an initial position", lease.Lease{Checkpoint: checkpointer.LatestPosition}, Latest, "7", position{After: "7"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resumeAfter := func(stream, shard string) (string, bool) {
				if stream != "s" || shard != "shard-1" {
					t.Errorf("ResumeAfter(%q, %q), want (s, shard-1)", stream, shard)
				}
				return tc.resume, tc.resume != ""
			}
			lr := &leaseRun{
				rn:  &run{r: &Receiver{progress: newProgress()}, cfg: Config{Stream: "s", InitialPosition: tc.initial, AtTimestamp: ts}, resumeAfter: resumeAfter},
				log: slog.New(slog.DiscardHandler),
			}
			tc.lease.Shard = "shard-1"
			if diff := cmp.Diff(tc.want, lr.position(tc.lease)); diff != "" {
				t.Errorf("position (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLeaseLatestIsCompleted checks that the checkpointed number is the
// greatest completed one, never a stored one: a new owner of the shard
// does not read this worker's recovery log (G4).
func TestLeaseLatestIsCompleted(t *testing.T) {
	db := dynamodb.New(dynamodb.Options{Region: "us-east-1"}) // no call is made
	r, err := New(Config{Stream: "s", App: "app", Leases: &leasetable.Config{DynamoDB: db}})
	if err != nil {
		t.Fatal(err)
	}
	rn := &run{r: r, cfg: r.cfg, clock: clock.Real{}, logger: slog.New(slog.DiscardHandler)}
	lr, err := newLeaseRun(t.Context(), rn, source.Runtime[Record]{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := lr.latest("x"); ok {
		t.Error("latest before anything completed: ok")
	}
	r.progress.stored([]batch.SeqRange{{Stream: "s", Shard: "x", First: "1", Last: "9", Count: 2}, {Stream: "s", Shard: "x", First: "10", Last: "20", Count: 2}})
	if got, ok := lr.latest("x"); ok {
		t.Errorf("latest with records stored, none completed = %q; want none", got)
	}
	block := func(first, last string) batch.BlockInfo {
		return batch.BlockInfo{Ranges: []batch.SeqRange{{Stream: "s", Shard: "x", First: first, Last: last, Count: 2}}}
	}
	r.blocksCompleted(context.Background(), []batch.BlockInfo{block("1", "9")})
	r.blocksCompleted(context.Background(), []batch.BlockInfo{block("1", "8")}) // never backwards
	if got, ok := lr.latest("x"); !ok || got != "9" {
		t.Errorf("latest = %q, %v; want the completed 9, not the stored 20", got, ok)
	}
	if _, ok := lr.latest("y"); ok {
		t.Error("latest of an unknown shard: ok")
	}
}

func TestLeaseDefaults(t *testing.T) {
	r, err := New(Config{Stream: "s", App: "my-app", Leases: &leasetable.Config{LeaseDuration: 3 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	l := *r.cfg.Leases
	if l.WorkerID == "" || r.WorkerID() != l.WorkerID {
		t.Errorf("WorkerID %q, Receiver.WorkerID %q", l.WorkerID, r.WorkerID())
	}
	l.WorkerID = ""
	want := leasetable.Config{LeaseDuration: 3 * time.Second, RenewInterval: time.Second, TakeInterval: time.Second, MaxStealsPerCycle: lease.DefaultMaxStealsPerCycle, AttemptTimeout: 600 * time.Millisecond, ScanInterval: lease.DefaultScanInterval}
	if diff := cmp.Diff(want, l); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	if got := leaseTable(l, "my-app"); got != "my-app" {
		t.Errorf("table name %q, want the App", got)
	}
	other, _ := New(Config{Stream: "s", App: "my-app", Leases: &leasetable.Config{}})
	if other.WorkerID() == r.WorkerID() {
		t.Errorf("two receivers got the same default WorkerID %q", r.WorkerID())
	}
}

// TestLeaseStateDirAsSet checks that Leases.StateDir is used as the user
// set it, and that unset it stays unset (no state: a restart waits for the
// old leases to expire), whatever recovery log the driver keeps: the state
// directory is passed explicitly, never derived.
func TestLeaseStateDirAsSet(t *testing.T) {
	for _, set := range []string{"", "/var/lib/app/leases"} {
		db := dynamodb.New(dynamodb.Options{Region: "us-east-1"}) // no call is made
		r, err := New(Config{Stream: "s", App: "app", Leases: &leasetable.Config{DynamoDB: db, StateDir: set}})
		if err != nil {
			t.Fatal(err)
		}
		rn := &run{r: r, cfg: r.cfg, clock: clock.Real{}, logger: slog.New(slog.DiscardHandler)}
		lr, err := newLeaseRun(t.Context(), rn, source.Runtime[Record]{})
		if err != nil {
			t.Fatal(err)
		}
		if lr.cfg.StateDir != set {
			t.Errorf("set %q: StateDir %q, want it as set", set, lr.cfg.StateDir)
		}
	}
}

func TestLeaseCheckpointIntervalDefault(t *testing.T) {
	tests := []struct {
		name          string
		set           time.Duration // leasetable.Config.CheckpointInterval
		batchInterval time.Duration // source.Runtime.BatchInterval
		want          time.Duration
	}{
		{"default", 0, 3 * time.Second, time.Minute},
		{"no batch interval", 0, 0, time.Minute},
		{"batch interval longer", 0, 5 * time.Minute, 5 * time.Minute},
		{"set wins", 250 * time.Millisecond, 3 * time.Second, 250 * time.Millisecond},
		{"set without batch interval", 250 * time.Millisecond, 0, 250 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			db := dynamodb.New(dynamodb.Options{Region: "us-east-1"}) // no call is made
			r, err := New(Config{Stream: "s", App: "app", Leases: &leasetable.Config{DynamoDB: db, CheckpointInterval: tc.set}})
			if err != nil {
				t.Fatal(err)
			}
			rn := &run{r: r, cfg: r.cfg, clock: clock.Real{}, logger: slog.New(slog.DiscardHandler)}
			lr, err := newLeaseRun(t.Context(), rn, source.Runtime[Record]{BatchInterval: tc.batchInterval})
			if err != nil {
				t.Fatal(err)
			}
			if got := lr.cfg.CheckpointInterval; got != tc.want {
				t.Errorf("CheckpointInterval = %v, want %v", got, tc.want)
			}
			// A failed SHARD_END mark is retried at the renew period (a
			// third of the default 10 s lease), however long the
			// checkpoint interval.
			if got, want := lr.shardEndRetry(), min(tc.want, lease.DefaultLeaseDuration/3); got != want {
				t.Errorf("shard-end retry period = %v, want %v", got, want)
			}
		})
	}
}
