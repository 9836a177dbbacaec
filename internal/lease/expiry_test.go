package lease

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/internal/attempt"
	"github.com/weirstream/weir/internal/localaws"
)

// TestCoordinatorSilentRenewalCountsAsLost holds a worker's renewals in
// flight (a connection gone silent) and checks, on the worker's manual
// clock, that they are abandoned when the leases expire and the leases are
// reported lost then, not when the connection comes back: with a renewal
// per lease (RenewEveryLease) and with the default one beat per worker,
// which vouches for all its leases.
func TestCoordinatorSilentRenewalCountsAsLost(t *testing.T) {
	for _, tc := range silentRenewalCases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorker(t, localaws.UniqueName(t), "w", servers.Env(t).DynamoDB(), func(c *CoordinatorConfig) { c.RenewEveryLease = tc.everyOne })
			shards := shardIDs(2)
			done := silenceRenewals(t, w, shards, tc.inFlight)
			w.clk.Advance(testLease - w.c.cfg.RenewInterval - time.Nanosecond)
			if n := len(w.c.Held()); n != 2 || !w.c.Holds(shards[0].ID) {
				t.Fatalf("1ns before expiry: %d held, Holds %v; want both held", n, w.c.Holds(shards[0].ID))
			}
			w.clk.Advance(time.Nanosecond)
			awaitClosed(t, done, "renewals still in flight after their leases expired")
			w.c.deliver()
			if _, lost := w.events(); !cmp.Equal(ids(shards), lost) {
				t.Errorf("lost %v, want %v", lost, ids(shards))
			}
			if w.c.Holds(shards[0].ID) {
				t.Error("Holds is true after the lease expired")
			}
		})
	}
}

// silentRenewalCases are the two ways a worker renews its leases, each
// with the number of renewal calls a cycle makes for two leases: one per
// lease (RenewEveryLease), or the default one beat per worker, which
// vouches for all its leases.
var silentRenewalCases = []struct {
	name     string
	everyOne bool
	inFlight int // renewals held
}{
	{"every lease", true, 2},
	{"beat", false, 1},
}

// takeAll has w take the leases of shards, in one cycle, and fails t
// unless it then holds them all.
func takeAll(t *testing.T, w *worker, shards []ShardInfo) {
	t.Helper()
	if err := w.c.SyncShards(t.Context(), shards); err != nil {
		t.Fatal(err)
	}
	w.cycle(t.Context())
	if diff := cmp.Diff(ids(shards), w.held()); diff != "" {
		t.Fatalf("leases held after a cycle (-want +got):\n%s", diff)
	}
}

// silenceRenewals has w take the leases of shards, then, one
// RenewInterval later on w's clock, starts a renewal cycle with w's
// DynamoDB gone silent (paused, never resumed: its calls end only when
// their context does). It returns once inFlight renewal calls are held,
// with a channel closed when the cycle returns.
func silenceRenewals(t *testing.T, w *worker, shards []ShardInfo, inFlight int) <-chan struct{} {
	t.Helper()
	takeAll(t, w, shards)
	w.clk.Advance(w.c.cfg.RenewInterval)
	w.db.pause()
	done := make(chan struct{})
	go func() { defer close(done); w.c.renewCycle(t.Context()) }()
	for range inFlight {
		<-w.db.blocked
	}
	return done
}

// awaitClosed waits for done to be closed, and fails t with msg if it is
// not within waitGuard.
func awaitClosed(t *testing.T, done <-chan struct{}, msg string) {
	t.Helper()
	guard := time.NewTimer(waitGuard)
	defer guard.Stop()
	select {
	case <-done:
	case <-guard.C:
		t.Fatal(msg)
	}
}

// waitGuard bounds a wait that fails the test if reached: not a sleep.
const waitGuard = 30 * time.Second

func TestAttemptTimeoutConfig(t *testing.T) {
	if got := WithDefaults(leasetable.Config{}).AttemptTimeout; got != 2*time.Second {
		t.Errorf("default AttemptTimeout = %v, want LeaseDuration/5, 2s", got)
	}
	if got := WithDefaults(leasetable.Config{LeaseDuration: time.Second}).AttemptTimeout; got != 200*time.Millisecond {
		t.Errorf("default AttemptTimeout with a 1s lease = %v, want 200ms", got)
	}
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "AttemptTimeout -1s: must be > 0"},
		{10 * time.Second, "AttemptTimeout 10s: must be shorter than LeaseDuration 10s"},
	} {
		problems := Problems(WithDefaults(leasetable.Config{WorkerID: "w", AttemptTimeout: tt.d}))
		if !strings.Contains(errors.Join(problems...).Error(), tt.want) {
			t.Errorf("AttemptTimeout %v: problems %v, want one saying %q", tt.d, problems, tt.want)
		}
	}
}

// TestCommitAfterExpirySaysSo checks that a checkpoint of a lease that
// expired on this worker's clock (a pause past LeaseDuration), which is
// abandoned unsent, fails with an error saying so, not with a bare
// "context canceled" that reads as if the caller gave up.
func TestCommitAfterExpirySaysSo(t *testing.T) {
	ctx := t.Context()
	w := newWorker(t, localaws.UniqueName(t), "w", servers.Env(t).DynamoDB(), nil)
	takeAll(t, w, shardIDs(1))
	shard := ids(shardIDs(1))[0]
	w.clk.Advance(2 * testLease)
	err := w.c.Commit(ctx, shard, "100")
	if err == nil || !strings.Contains(err.Error(), "expired on this worker's clock") || !errors.Is(err, attempt.ErrTimeout) {
		t.Errorf("Commit after a pause past the lease = %v, want an error saying the lease expired on this worker's clock, wrapping attempt.ErrTimeout", err)
	}
}

// TestSilentRenewalLossWarns checks that leases lost because this
// worker's own renewal (or beat) went unanswered until they expired, its
// first failure, are reported at WARN, not only at INFO as a lease taken
// by another worker is: the worker stops reading the shards because its
// DynamoDB does not answer.
func TestSilentRenewalLossWarns(t *testing.T) {
	for _, tc := range silentRenewalCases {
		t.Run(tc.name, func(t *testing.T) {
			var logs syncBuf
			w := newWorker(t, localaws.UniqueName(t), "w", servers.Env(t).DynamoDB(), func(c *CoordinatorConfig) {
				c.RenewEveryLease = tc.everyOne
				c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
			})
			done := silenceRenewals(t, w, shardIDs(2), tc.inFlight)
			w.clk.Advance(testLease - w.c.cfg.RenewInterval)
			awaitClosed(t, done, "renewals still in flight after their leases expired")
			if len(w.c.Held()) != 0 {
				t.Fatalf("held %v after expiry, want none", w.held())
			}
			if out := logs.tail(100); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "lost") {
				t.Errorf("leases lost to an unanswered renewal logged at WARN:\n%s\nwant a warning of the loss", out)
			}
		})
	}
}
