package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/internal/checkpointer"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/internal/localaws"
)

// newDynaliteTable returns an ensured table of its own on the shared dynalite.
func newDynaliteTable(t *testing.T) (*Table, *dynamodb.Client) {
	t.Helper()
	db := servers.Env(t).DynamoDB()
	tbl, err := NewTable(TableConfig{Name: localaws.UniqueName(t), Client: db, PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := tbl.Ensure(t.Context()); err != nil {
		t.Fatal(err)
	}
	return tbl, db
}

func mustGet(t *testing.T, tbl *Table, shard string) Lease {
	t.Helper()
	l, ok, err := tbl.Get(t.Context(), shard)
	if err != nil || !ok {
		t.Fatalf("Get %s = %v, %v, %v", shard, l, ok, err)
	}
	return l
}

func TestTableEnsure(t *testing.T) {
	tbl, db := newDynaliteTable(t)
	if err := tbl.Ensure(t.Context()); err != nil {
		t.Errorf("Ensure of an existing table = %v", err)
	}
	other := localaws.UniqueName(t)
	_, err := db.CreateTable(t.Context(), &dynamodb.CreateTableInput{
		TableName:            &other,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	if err != nil {
		t.Fatal(err)
	}
	wrong, err := NewTable(TableConfig{Name: other, Client: db})
	if err != nil {
		t.Fatal(err)
	}
	if err := wrong.Ensure(t.Context()); err == nil || !strings.Contains(err.Error(), "key schema") {
		t.Errorf("Ensure of a table keyed by id = %v, want a key schema error", err)
	}
}

// TestTableEnsureKeyType checks that Ensure refuses a table whose hash key
// is leaseKey but not a string (leases are keyed by shard ID), naming the
// table, the type and the fix, rather than accepting it and failing every
// write of a lease.
func TestTableEnsureKeyType(t *testing.T) {
	_, db := newDynaliteTable(t)
	name := localaws.UniqueName(t)
	_, err := db.CreateTable(t.Context(), &dynamodb.CreateTableInput{
		TableName:            &name,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(attrKey), AttributeType: types.ScalarAttributeTypeN}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(attrKey), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	if err != nil {
		t.Fatal(err)
	}
	wrong, err := NewTable(TableConfig{Name: name, Client: db})
	if err != nil {
		t.Fatal(err)
	}
	err = wrong.Ensure(t.Context())
	if err == nil || !strings.Contains(err.Error(), "key schema") || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "fix:") {
		t.Errorf("Ensure of a table keyed by a number leaseKey = %v, want a key schema error naming the table and the fix", err)
	}
}

func TestTableConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  TableConfig
		want []string // substrings of the error; nil means valid
	}{
		{"valid", TableConfig{Name: "app.leases-1_a", Client: &dynamodb.Client{}}, nil},
		{"short name and no client", TableConfig{Name: "ab"}, []string{`"ab": length 2`, "client is nil"}},
		{"bad byte", TableConfig{Name: "my table", Client: &dynamodb.Client{}}, []string{`byte 2 (' ')`}},
		{"too long", TableConfig{Name: strings.Repeat("a", 256), Client: &dynamodb.Client{}}, []string{"length 256"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewTable(tc.cfg)
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, leasetable.ErrInvalidConfig) {
				t.Fatalf("NewTable = %v, want leasetable.ErrInvalidConfig", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestTableCreateListGet(t *testing.T) {
	tbl, _ := newDynaliteTable(t)
	tbl.pageLimit = 7 // several Scan pages
	var want []Lease
	for i := range 25 {
		l := Lease{Shard: fmt.Sprintf("shardId-%012d", i), Checkpoint: checkpointer.TrimHorizon}
		if i >= 20 {
			l.Parents = []string{fmt.Sprintf("shardId-%012d", i-20)}
		}
		created, err := tbl.Create(t.Context(), l)
		if err != nil || !created {
			t.Fatalf("Create %s = %v, %v", l.Shard, created, err)
		}
		want = append(want, l)
	}
	created, err := tbl.Create(t.Context(), Lease{Shard: want[0].Shard, Checkpoint: checkpointer.LatestPosition})
	if err != nil || created {
		t.Errorf("second Create = %v, %v; want false, nil", created, err)
	}
	got, err := tbl.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(got, func(i, j int) bool { return got[i].Shard < got[j].Shard })
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("List (-want +got):\n%s", d)
	}
	if _, ok, err := tbl.Get(t.Context(), "nope"); ok || err != nil {
		t.Errorf("Get of a missing lease = %v, %v", ok, err)
	}
}

func TestTableConditionalWrites(t *testing.T) {
	tbl, _ := newDynaliteTable(t)
	ctx := t.Context()
	if _, err := tbl.Create(ctx, Lease{Shard: "s"}); err != nil {
		t.Fatal(err)
	}
	unowned := mustGet(t, tbl, "s")
	a, err := tbl.Take(ctx, unowned, "worker-a")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(Lease{Shard: "s", Owner: "worker-a", Counter: 1, Checkpoint: checkpointer.TrimHorizon}, a); d != "" {
		t.Errorf("taken lease (-want +got):\n%s", d)
	}
	if _, err := tbl.Take(ctx, unowned, "worker-b"); !errors.Is(err, checkpointer.ErrLeaseLost) {
		t.Errorf("Take with a stale counter = %v, want ErrLeaseLost", err)
	}
	old := a // what a restarted worker reusing worker-a's ID could hold
	a, err = tbl.Renew(ctx, a)
	if err != nil || a.Counter != 2 {
		t.Fatalf("Renew = %+v, %v; want counter 2", a, err)
	}
	// The right owner with a stale counter is refused: the counter half of
	// the condition.
	if _, err := tbl.Checkpoint(ctx, old, "1", 0); !errors.Is(err, checkpointer.ErrLeaseLost) {
		t.Errorf("Checkpoint with the owner but a stale counter = %v, want ErrLeaseLost", err)
	}
	if _, err := tbl.Renew(ctx, old); !errors.Is(err, checkpointer.ErrLeaseLost) {
		t.Errorf("Renew with the owner but a stale counter = %v, want ErrLeaseLost", err)
	}
	a, err = tbl.Checkpoint(ctx, a, "49590338271490256608559692538361571095921575989136588898", 0)
	if err != nil {
		t.Fatal(err)
	}
	if a.OwnerSwitches != 0 || a.Counter != 3 {
		t.Errorf("after checkpoint: %+v, want switches 0, counter 3", a)
	}
	// Worker b steals the lease; a's stale copy can neither renew nor checkpoint.
	b, err := tbl.Take(ctx, mustGet(t, tbl, "s"), "worker-b")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Renew(ctx, a); !errors.Is(err, checkpointer.ErrLeaseLost) {
		t.Errorf("zombie Renew = %v, want ErrLeaseLost", err)
	}
	if _, err := tbl.Checkpoint(ctx, a, "49590338271490256608559692538361571095921575989136589999", 0); !errors.Is(err, checkpointer.ErrLeaseLost) {
		t.Errorf("zombie Checkpoint = %v, want ErrLeaseLost", err)
	}
	// A copy with the right counter but the wrong owner is refused too.
	forged := b
	forged.Owner = "worker-a"
	if _, err := tbl.Checkpoint(ctx, forged, "1", 0); !errors.Is(err, checkpointer.ErrLeaseLost) {
		t.Errorf("Checkpoint by a non-owner = %v, want ErrLeaseLost", err)
	}
	if got := mustGet(t, tbl, "s"); got.Checkpoint != a.Checkpoint || got.Owner != "worker-b" {
		t.Errorf("lease after zombie writes = %+v, want a's checkpoint and owner b", got)
	}
	r, err := tbl.Release(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if r.Owner != "" || r.Counter != b.Counter+1 {
		t.Errorf("released lease = %+v, want no owner, counter %d", r, b.Counter+1)
	}
	if _, err := tbl.Release(ctx, b); !errors.Is(err, checkpointer.ErrLeaseLost) {
		t.Errorf("second Release = %v, want ErrLeaseLost", err)
	}
	if _, err := tbl.Renew(ctx, Lease{Shard: "gone", Owner: "worker-a"}); !errors.Is(err, checkpointer.ErrLeaseLost) {
		t.Errorf("Renew of a missing lease = %v, want ErrLeaseLost", err)
	}
	if _, err := tbl.Checkpoint(ctx, r, "1", 0); err == nil || errors.Is(err, checkpointer.ErrLeaseLost) {
		t.Errorf("Checkpoint of an unowned lease = %v, want a plain error", err)
	}
	if _, err := tbl.Checkpoint(ctx, b, "12abc", 0); err == nil || errors.Is(err, checkpointer.ErrLeaseLost) {
		t.Errorf("Checkpoint of a bad value = %v, want a plain error", err)
	}
}

// failingDB fails every UpdateItem with a service error.
type failingDB struct{ leasetable.DynamoDBAPI }

func (failingDB) UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return nil, &types.InternalServerError{Message: aws.String("injected")}
}

func TestTableServiceErrorIsNotLeaseLost(t *testing.T) {
	tbl, db := newDynaliteTable(t)
	if _, err := tbl.Create(t.Context(), Lease{Shard: "s", Owner: "w"}); err != nil {
		t.Fatal(err)
	}
	failing := newTable(TableConfig{Name: tbl.Name(), Client: failingDB{db}}, slog.Default())
	_, err := failing.Renew(t.Context(), Lease{Shard: "s", Owner: "w"})
	var ise *types.InternalServerError
	if !errors.As(err, &ise) || errors.Is(err, checkpointer.ErrLeaseLost) {
		t.Errorf("Renew = %v, want the service error, not ErrLeaseLost", err)
	}
}

// TestTableKCLItems writes items the way a KCL application does (and one as
// weir did before it named the parents attribute as the KCL does) and checks
// that weir reads them, takes them over and keeps the attributes it does not
// write.
func TestTableKCLItems(t *testing.T) {
	tbl, db := newDynaliteTable(t)
	ctx := t.Context()
	kcl := []map[string]types.AttributeValue{
		{
			"leaseKey": str("shardId-000000000000"), "leaseOwner": str("kcl-host:1234"),
			"leaseCounter": num(417), "checkpoint": str("49590338271490256608559692538361571095921575989136588898"),
			"checkpointSubSequenceNumber": num(0), "ownerSwitchesSinceCheckpoint": num(2),
			"pendingCheckpoint": str("49590338271490256608559692538361571095921575989136589000"),
		},
		{
			"leaseKey": str("shardId-000000000001"), "leaseCounter": num(9), "checkpoint": str(checkpointer.ShardEnd),
			"checkpointSubSequenceNumber": num(0), "ownerSwitchesSinceCheckpoint": num(0),
		},
		{
			"leaseKey": str("shardId-000000000002"), "leaseOwner": str("kcl-host:1234"), "leaseCounter": num(12),
			"checkpoint": str(checkpointer.TrimHorizon), "checkpointSubSequenceNumber": num(0), "ownerSwitchesSinceCheckpoint": num(0),
			"parentShardIds": &types.AttributeValueMemberSS{Value: []string{"shardId-000000000001"}},
		},
	}
	for _, item := range kcl {
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(tbl.Name()), Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := tbl.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(got, func(i, j int) bool { return got[i].Shard < got[j].Shard })
	want := []Lease{
		{Shard: "shardId-000000000000", Owner: "kcl-host:1234", Counter: 417, Checkpoint: "49590338271490256608559692538361571095921575989136588898", OwnerSwitches: 2,
			PendingCheckpoint: "49590338271490256608559692538361571095921575989136589000"},
		{Shard: "shardId-000000000001", Counter: 9, Checkpoint: checkpointer.ShardEnd},
		{Shard: "shardId-000000000002", Owner: "kcl-host:1234", Counter: 12, Checkpoint: checkpointer.TrimHorizon, Parents: []string{"shardId-000000000001"}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("List of KCL items (-want +got):\n%s", d)
	}
	taken, err := tbl.Take(ctx, got[0], "weir-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Checkpoint(ctx, taken, "49590338271490256608559692538361571095921575989136589999", 0); err != nil {
		t.Fatal(err)
	}
	out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(tbl.Name()), Key: keyOf("shardId-000000000000"), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"leaseOwner": "weir-1", "checkpoint": "49590338271490256608559692538361571095921575989136589999",
		"pendingCheckpoint": "49590338271490256608559692538361571095921575989136589000",
	} {
		if v, ok := out.Item[name].(*types.AttributeValueMemberS); !ok || v.Value != want {
			t.Errorf("%s = %#v, want %q", name, out.Item[name], want)
		}
	}
	if v, ok := out.Item["leaseCounter"].(*types.AttributeValueMemberN); !ok || v.Value != "419" {
		t.Errorf("leaseCounter = %#v, want 419", out.Item["leaseCounter"])
	}
}

// TestTableWeirCheckpointMarker checks that weir's checkpoints carry the
// weirCheckpoint marker, and that a KCL application's later checkpoint
// (which writes checkpoint and sub-sequence and keeps unknown attributes)
// is told apart from weir's.
func TestTableWeirCheckpointMarker(t *testing.T) {
	tbl, db := newDynaliteTable(t)
	ctx := t.Context()
	if _, err := tbl.Create(ctx, Lease{Shard: "s"}); err != nil {
		t.Fatal(err)
	}
	l, err := tbl.Take(ctx, mustGet(t, tbl, "s"), "weir-1")
	if err != nil {
		t.Fatal(err)
	}
	if l.WrittenByWeir() {
		t.Errorf("a new lease at %s: WrittenByWeir", l.Checkpoint)
	}
	if l, err = tbl.Checkpoint(ctx, l, "100", 0); err != nil {
		t.Fatal(err)
	}
	if l.WeirCheckpoint != "100" || !l.WrittenByWeir() || !mustGet(t, tbl, "s").WrittenByWeir() {
		t.Errorf("after weir's checkpoint 100: %+v, WrittenByWeir %v", l, l.WrittenByWeir())
	}
	kcl := func(seq string, subSeq int64) Lease {
		t.Helper()
		_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(tbl.Name()), Key: keyOf("s"),
			UpdateExpression:          aws.String("SET checkpoint = :c, checkpointSubSequenceNumber = :s, leaseCounter = leaseCounter + :one"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":c": str(seq), ":s": num(subSeq), ":one": num(1)},
		})
		if err != nil {
			t.Fatal(err)
		}
		return mustGet(t, tbl, "s")
	}
	tests := []struct {
		name   string
		seq    string
		subSeq int64
		weir   bool
	}{
		{"KCL moves on", "200", 0, false},
		{"KCL inside weir's record", "100", 3, false},
		// Indistinguishable from weir's own, and read the same way: KCL
		// wrote it after reading the record again from its start.
		{"KCL rewrites weir's checkpoint", "100", 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := kcl(tc.seq, tc.subSeq)
			if got.WeirCheckpoint != "100" || got.WrittenByWeir() != tc.weir {
				t.Errorf("after KCL's (%s, %d): %+v, WrittenByWeir %v, want %v", tc.seq, tc.subSeq, got, got.WrittenByWeir(), tc.weir)
			}
		})
	}
}

// TestTableLatestPin checks the pin of a lease at LATEST (Lease.LatestAt):
// the first pinning take writes it, no later take moves it, a checkpoint
// removes it, and a lease at another position is never pinned.
func TestTableLatestPin(t *testing.T) {
	tbl, _ := newDynaliteTable(t)
	ctx := t.Context()
	for _, l := range []Lease{{Shard: "latest", Checkpoint: checkpointer.LatestPosition}, {Shard: "trim", Checkpoint: checkpointer.TrimHorizon}} {
		if _, err := tbl.Create(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	first := time.UnixMilli(1_700_000_000_000)
	l, err := tbl.take(ctx, mustGet(t, tbl, "latest"), "w1", first)
	if err != nil {
		t.Fatal(err)
	}
	if !l.LatestAt.Equal(first) || !mustGet(t, tbl, "latest").LatestAt.Equal(first) {
		t.Errorf("after the first take: LatestAt %v (stored %v), want %v", l.LatestAt, mustGet(t, tbl, "latest").LatestAt, first)
	}
	if l, err = tbl.take(ctx, l, "w2", first.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if !l.LatestAt.Equal(first) {
		t.Errorf("after a second take: LatestAt %v, want the first take's %v", l.LatestAt, first)
	}
	if l, err = tbl.Checkpoint(ctx, l, "100", 0); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, tbl, "latest"); !l.LatestAt.IsZero() || !got.LatestAt.IsZero() {
		t.Errorf("after a checkpoint: LatestAt %v (stored %v), want none", l.LatestAt, got.LatestAt)
	}
	trim, err := tbl.take(ctx, mustGet(t, tbl, "trim"), "w1", first)
	if err != nil {
		t.Fatal(err)
	}
	if !trim.LatestAt.IsZero() {
		t.Errorf("a lease at %s pinned at %v", trim.Checkpoint, trim.LatestAt)
	}
}
