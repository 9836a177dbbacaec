package lease

import (
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/google/go-cmp/cmp"
)

// TestBoardBeatConditions checks the board's writes on the real server: a
// new incarnation's first beat needs a fresh attribute, each later beat the
// value of the one before; killBeat removes a beat only while it is as
// seen; a removed beat refuses the next one; writes on a missing item are
// refused; and a beat's answer shows every beat and the writer's notices.
func TestBoardBeatConditions(t *testing.T) {
	ctx := t.Context()
	tbl, _ := newDynaliteTable(t)
	for _, s := range []string{"shard-a", "shard-b"} {
		if _, err := tbl.Create(ctx, Lease{Shard: s}); err != nil {
			t.Fatal(err)
		}
	}
	a, b := beatAttr("w1", "i1"), beatAttr("w2", "i2")
	beats, _, _, err := tbl.beat(ctx, "shard-a", a, "w1", 0, nil, nil, nil)
	if err != nil || beats[a].n != 1 {
		t.Fatalf("first beat: %v, %v", beats, err)
	}
	if _, _, _, err := tbl.beat(ctx, "shard-a", a, "w1", 0, nil, nil, nil); !errors.Is(err, errBeatRefused) {
		t.Errorf("a second first beat of one incarnation = %v, want errBeatRefused", err)
	}
	if _, _, _, err := tbl.beat(ctx, "shard-a", a, "w1", 7, nil, nil, nil); !errors.Is(err, errBeatRefused) {
		t.Errorf("a beat after another value = %v, want errBeatRefused", err)
	}
	if _, _, _, err := tbl.beat(ctx, "shard-a", b, "w2", 0, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := tbl.noteSteal(ctx, "shard-a", "w1", "shard-b", 5); err != nil {
		t.Fatal(err)
	}
	beats, notices, orphans, err := tbl.beat(ctx, "shard-a", a, "w1", 1, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]beatVal{a: {"w1", 2}, b: {"w2", 1}}
	if d := cmp.Diff(want, beats, cmp.AllowUnexported(beatVal{})); d != "" {
		t.Errorf("beats (-want +got):\n%s", d)
	}
	if !cmp.Equal(notices, []string{"shard-b 5"}) || len(orphans) != 0 {
		t.Errorf("notices %v, orphans %v; want [shard-b 5] and none", notices, orphans)
	}
	if killed, err := tbl.killBeat(ctx, "shard-a", b, 0); killed || err != nil {
		t.Errorf("killBeat of a beat that changed = %v, %v; want false", killed, err)
	}
	if killed, err := tbl.killBeat(ctx, "shard-a", b, 1); !killed || err != nil {
		t.Errorf("killBeat of the beat as seen = %v, %v; want true", killed, err)
	}
	if _, _, _, err := tbl.beat(ctx, "shard-a", b, "w2", 1, nil, nil, nil); !errors.Is(err, errBeatRefused) {
		t.Errorf("a killed worker's beat = %v, want errBeatRefused", err)
	}
	if err := tbl.noteSteal(ctx, "shard-a", "w2", "shard-b", 6); err != nil {
		t.Fatal(err)
	}
	_, _, orphans, err = tbl.beat(ctx, "shard-a", a, "w1", 2, []string{"shard-b 5"}, nil, nil)
	if err != nil || !cmp.Equal(orphans, map[string][]string{noticeAttr("w2"): {"shard-b 6"}}) {
		t.Errorf("orphans %v, %v; want the killed worker's notices", orphans, err)
	}
	_, notices, orphans, err = tbl.beat(ctx, "shard-a", a, "w1", 3, nil, nil, orphans)
	if err != nil || len(notices) != 0 || len(orphans) != 0 {
		t.Errorf("after the acknowledgement and the clean-up: notices %v, orphans %v, %v", notices, orphans, err)
	}
	if _, _, _, err := tbl.beat(ctx, "no-such-shard", a, "w1", 0, nil, nil, nil); !errors.Is(err, errBeatRefused) {
		t.Errorf("a beat on a missing item = %v, want errBeatRefused", err)
	}
	if got := mustGet(t, tbl, "shard-a"); got.Counter != 0 || got.Owner != "" {
		t.Errorf("the board's lease after the beats: %+v, want its counter and owner untouched", got)
	}
}

// TestBoardOrphanCleanupKeepsLaterNotices forces the interleaving that
// lost a steal notice in TestCoordinatorBalancesAJoin/together=true: a
// worker's beat sees notices for a worker with no beat on the board yet
// (an orphan: its first beat is still to come), a thief then writes a new
// notice for that worker, and the next beat cleans up the orphans. Only
// the notices seen orphaned may go: the new one is for a lease the worker
// holds, and without it the worker keeps reading a shard asked of it until
// its next checkpoint or scan, the thief waiting for the hand-off.
func TestBoardOrphanCleanupKeepsLaterNotices(t *testing.T) {
	ctx := t.Context()
	ws := defaultFleet(t, 1, 2, nil)
	w := ws[0]
	w.cycle(ctx)        // takes both leases
	w.c.renewCycle(ctx) // first beat, on the board
	w.c.mu.Lock()
	board := w.c.beatOn
	w.c.mu.Unlock()
	if board == "" {
		t.Fatal("no board after a beat")
	}
	const other = "worker-joining"
	if err := w.c.table.noteSteal(ctx, board, other, "shard-old", 3); err != nil {
		t.Fatal(err)
	}
	w.clk.Advance(w.c.cfg.RenewInterval)
	w.c.renewCycle(ctx) // sees the orphaned notice
	if err := w.c.table.noteSteal(ctx, board, other, "shard-new", 4); err != nil {
		t.Fatal(err)
	}
	w.clk.Advance(w.c.cfg.RenewInterval)
	w.c.renewCycle(ctx) // cleans up what it saw orphaned
	out, err := w.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(w.c.Table().name), Key: keyOf(board), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := noticesOf(out.Item, other), []string{stealNotice("shard-new", 4)}; !cmp.Equal(got, want) {
		t.Errorf("notices for %s after the clean-up: %v, want %v (the one written after the orphans were seen)", other, got, want)
	}
}
