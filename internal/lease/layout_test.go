package lease

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/internal/checkpointer"
	"github.com/weirstream/weir/internal/localaws"
)

// kclItem is a lease item with every attribute the KCL's
// DynamoDBLeaseSerializer (v2.x and v3.x) writes, under its exact name and
// type.
func kclItem(shard string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"leaseKey":                           str(shard),
		"leaseOwner":                         str("kcl-worker-1"),
		"leaseCounter":                       num(77),
		"ownerSwitchesSinceCheckpoint":       num(3),
		"checkpoint":                         str("49590338271490256608559692538361571095921575989136588898"),
		"checkpointSubSequenceNumber":        num(2),
		"parentShardId":                      &types.AttributeValueMemberSS{Value: []string{"shardId-000000000000"}},
		"childShardIds":                      &types.AttributeValueMemberSS{Value: []string{"shardId-000000000007", "shardId-000000000008"}},
		"pendingCheckpoint":                  str("49590338271490256608559692538361571095921575989136589000"),
		"pendingCheckpointSubSequenceNumber": num(5),
		"pendingCheckpointState":             &types.AttributeValueMemberB{Value: []byte{1, 2, 3}},
		"startingHashKey":                    str("0"),
		"endingHashKey":                      str("170141183460469231731687303715884105727"),
		"throughputKBps":                     &types.AttributeValueMemberN{Value: "12.5"},
		"checkpointOwner":                    str("kcl-worker-0"),
		"entityType":                         str("LEASE"),
	}
}

func rawItem(t *testing.T, db *dynamodb.Client, tbl *Table, shard string) map[string]types.AttributeValue {
	t.Helper()
	out, err := db.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: aws.String(tbl.Name()), Key: keyOf(shard), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

var avOpts = cmp.Options{cmp.AllowUnexported(types.AttributeValueMemberS{}, types.AttributeValueMemberN{},
	types.AttributeValueMemberSS{}, types.AttributeValueMemberB{})}

// TestTableKCLLayout reads a lease item written with the KCL's exact names
// and types, checks that weir's writes (take, renew, checkpoint, release)
// change only what the KCL's would and keep the rest, and that a lease weir
// creates and ends is written as the KCL writes one.
func TestTableKCLLayout(t *testing.T) {
	tbl, db := newDynaliteTable(t)
	ctx := t.Context()
	const shard = "shardId-000000000003"
	put := func(item map[string]types.AttributeValue) {
		t.Helper()
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(tbl.Name()), Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	put(kclItem(shard))
	// KCL 3.x keeps other entities in the lease table: not leases.
	put(map[string]types.AttributeValue{"leaseKey": str("Leader"), "entityType": str("LEADER"), "leaseCounter": str("not a lease")})

	leases, bad, err := tbl.ListAll(ctx)
	if err != nil || len(bad) != 0 {
		t.Fatalf("ListAll: %v, bad %v", err, bad)
	}
	want := Lease{
		Shard: shard, Owner: "kcl-worker-1", Counter: 77, OwnerSwitches: 3,
		Checkpoint: "49590338271490256608559692538361571095921575989136588898", SubSequence: 2,
		Parents:           []string{"shardId-000000000000"},
		Children:          []string{"shardId-000000000007", "shardId-000000000008"},
		PendingCheckpoint: "49590338271490256608559692538361571095921575989136589000", PendingCheckpointSubSequence: 5,
		StartingHashKey: "0", EndingHashKey: "170141183460469231731687303715884105727",
		CheckpointOwner: "kcl-worker-0",
	}
	if d := cmp.Diff([]Lease{want}, leases); d != "" {
		t.Fatalf("ListAll (-want +got):\n%s", d)
	}

	l, err := tbl.Take(ctx, leases[0], "weir-1")
	if err != nil {
		t.Fatal(err)
	}
	if l, err = tbl.Renew(ctx, l); err != nil {
		t.Fatal(err)
	}
	if l, err = tbl.Checkpoint(ctx, l, "49590338271490256608559692538361571095921575989136589999", 0); err != nil {
		t.Fatal(err)
	}
	if _, err = tbl.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	wantItem := kclItem(shard)
	delete(wantItem, "leaseOwner")      // released
	delete(wantItem, "checkpointOwner") // a take ends a KCL hand-off, as the KCL's take does
	wantItem["leaseCounter"] = num(81)
	wantItem["ownerSwitchesSinceCheckpoint"] = num(0)
	wantItem["checkpoint"] = str("49590338271490256608559692538361571095921575989136589999")
	wantItem["checkpointSubSequenceNumber"] = num(0)
	wantItem["weirCheckpoint"] = str("49590338271490256608559692538361571095921575989136589999")
	if d := cmp.Diff(wantItem, rawItem(t, db, tbl, shard), avOpts); d != "" {
		t.Errorf("item after weir's take, renew, checkpoint, release (-want +got):\n%s", d)
	}

	// A lease weir creates, then ends: the KCL's names and types.
	if _, err := tbl.Create(ctx, Lease{Shard: "shardId-000000000009", Checkpoint: checkpointer.TrimHorizon,
		Parents: []string{"shardId-000000000003"}, StartingHashKey: "0", EndingHashKey: "85070591730234615865843651857942052863"}); err != nil {
		t.Fatal(err)
	}
	created := map[string]types.AttributeValue{
		"leaseKey": str("shardId-000000000009"), "leaseCounter": num(0), "ownerSwitchesSinceCheckpoint": num(0),
		"checkpoint": str(checkpointer.TrimHorizon), "checkpointSubSequenceNumber": num(0),
		"parentShardId":   &types.AttributeValueMemberSS{Value: []string{"shardId-000000000003"}},
		"startingHashKey": str("0"), "endingHashKey": str("85070591730234615865843651857942052863"),
		"entityType": str("LEASE"),
	}
	if d := cmp.Diff(created, rawItem(t, db, tbl, "shardId-000000000009"), avOpts); d != "" {
		t.Errorf("item weir created (-want +got):\n%s", d)
	}
	l, err = tbl.Take(ctx, mustGet(t, tbl, "shardId-000000000009"), "weir-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.checkpointEnd(ctx, l, []string{"shardId-000000000010"}); err != nil {
		t.Fatal(err)
	}
	got := rawItem(t, db, tbl, "shardId-000000000009")
	if d := cmp.Diff(&types.AttributeValueMemberSS{Value: []string{"shardId-000000000010"}}, got["childShardIds"], avOpts); d != "" {
		t.Errorf("childShardIds at SHARD_END (-want +got):\n%s", d)
	}
	if d := cmp.Diff(str(checkpointer.ShardEnd), got["checkpoint"], avOpts); d != "" {
		t.Errorf("checkpoint at SHARD_END (-want +got):\n%s", d)
	}
}

// TestTableLegacyParentsMigrated reads a lease weir wrote with the parents
// under parentShardIds (before it used the KCL's name) and checks that a
// take writes them to parentShardId.
func TestTableLegacyParentsMigrated(t *testing.T) {
	tbl, db := newDynaliteTable(t)
	ctx := t.Context()
	_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(tbl.Name()), Item: map[string]types.AttributeValue{
		"leaseKey": str("child"), "leaseCounter": num(4), "checkpoint": str(checkpointer.TrimHorizon),
		"checkpointSubSequenceNumber": num(0), "ownerSwitchesSinceCheckpoint": num(0),
		"parentShardIds": &types.AttributeValueMemberSS{Value: []string{"parent"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	l := mustGet(t, tbl, "child")
	if d := cmp.Diff([]string{"parent"}, l.Parents); d != "" {
		t.Fatalf("Parents from parentShardIds (-want +got):\n%s", d)
	}
	if _, err := tbl.Take(ctx, l, "weir-1"); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(&types.AttributeValueMemberSS{Value: []string{"parent"}}, rawItem(t, db, tbl, "child")["parentShardId"], avOpts); d != "" {
		t.Errorf("parentShardId after a take (-want +got):\n%s", d)
	}
}

// badItems are hand-written lease items weir cannot use, by the attribute
// at fault.
func badItems() map[string]map[string]types.AttributeValue {
	good := func(shard string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{
			"leaseKey": str(shard), "leaseOwner": str("w"), "leaseCounter": num(1), "checkpoint": str(checkpointer.TrimHorizon),
			"checkpointSubSequenceNumber": num(0), "ownerSwitchesSinceCheckpoint": num(0),
		}
	}
	with := func(shard, attr string, v types.AttributeValue) map[string]types.AttributeValue {
		item := good(shard)
		if v == nil {
			delete(item, attr)
		} else {
			item[attr] = v
		}
		return item
	}
	return map[string]map[string]types.AttributeValue{
		"counter-string":    with("counter-string", "leaseCounter", str("1")),
		"counter-38-digits": with("counter-38-digits", "leaseCounter", &types.AttributeValueMemberN{Value: strings.Repeat("9", 38)}),
		"counter-missing":   with("counter-missing", "leaseCounter", nil),
		"owner-number":      with("owner-number", "leaseOwner", num(7)),
		"checkpoint-bad":    with("checkpoint-bad", "checkpoint", str("garbage!")),
		"checkpoint-none":   with("checkpoint-none", "checkpoint", nil),
		"parents-string":    with("parents-string", "parentShardId", str("shardId-000000000000")),
		"subseq-list":       with("subseq-list", "checkpointSubSequenceNumber", &types.AttributeValueMemberL{}),
	}
}

var badAttr = map[string]string{
	"counter-string": "leaseCounter", "counter-38-digits": "leaseCounter", "counter-missing": "leaseCounter",
	"owner-number": "leaseOwner", "checkpoint-bad": "checkpoint", "checkpoint-none": "checkpoint",
	"parents-string": "parentShardId", "subseq-list": "checkpointSubSequenceNumber",
}

// TestTableBadItems scans a table holding malformed items beside good ones:
// each bad item is returned as a *leasetable.BadItemError naming it, the attribute and
// a fix, and the good leases are all returned.
func TestTableBadItems(t *testing.T) {
	tbl, db := newDynaliteTable(t)
	ctx := t.Context()
	for _, item := range badItems() {
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(tbl.Name()), Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []string{"good-1", "good-2"} {
		if _, err := tbl.Create(ctx, Lease{Shard: s}); err != nil {
			t.Fatal(err)
		}
	}
	tbl.pageLimit = 3 // across pages
	leases, bad, err := tbl.ListAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var good []string
	for _, l := range leases {
		good = append(good, l.Shard)
	}
	slices.Sort(good)
	if d := cmp.Diff([]string{"good-1", "good-2"}, good); d != "" {
		t.Errorf("good leases (-want +got):\n%s", d)
	}
	gotAttr := map[string]string{}
	for _, b := range bad {
		gotAttr[b.Key] = b.Attr
		if b.Table != tbl.Name() || b.Fix == "" || !errors.Is(b, leasetable.ErrBadItem) || !strings.Contains(b.Error(), b.Key) {
			t.Errorf("bad item %s: %+v (%v)", b.Key, b, b)
		}
	}
	if d := cmp.Diff(badAttr, gotAttr); d != "" {
		t.Errorf("bad items: attribute at fault (-want +got):\n%s", d)
	}
	listed, err := tbl.List(ctx)
	if len(listed) != 2 || !errors.Is(err, leasetable.ErrBadItem) {
		t.Errorf("List = %d leases, %v; want 2 and leasetable.ErrBadItem", len(listed), err)
	}
	if _, _, err := tbl.Get(ctx, "checkpoint-bad"); !errors.Is(err, leasetable.ErrBadItem) {
		t.Errorf("Get of a bad item = %v, want leasetable.ErrBadItem", err)
	}
}

// TestCoordinatorKCLParentsFirst takes over a KCL application's table after
// a reshard: the children name their parent in parentShardId, as the KCL
// writes it. The child leases are taken only once the parent is at
// SHARD_END.
func TestCoordinatorKCLParentsFirst(t *testing.T) {
	ctx := t.Context()
	db := servers.Env(t).DynamoDB()
	table := localaws.UniqueName(t)
	w := newWorker(t, table, "weir", db, nil)
	item := func(shard, ckpt string, parents ...string) map[string]types.AttributeValue {
		it := map[string]types.AttributeValue{
			"leaseKey": str(shard), "leaseCounter": num(5), "checkpoint": str(ckpt),
			"checkpointSubSequenceNumber": num(0), "ownerSwitchesSinceCheckpoint": num(0),
		}
		if len(parents) > 0 {
			it["parentShardId"] = &types.AttributeValueMemberSS{Value: parents}
		}
		return it
	}
	for _, it := range []map[string]types.AttributeValue{
		item("parent", "49590338271490256608559692538361571095921575989136588898"),
		item("child-1", checkpointer.TrimHorizon, "parent"),
		item("child-2", checkpointer.TrimHorizon, "parent"),
	} {
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: it}); err != nil {
			t.Fatal(err)
		}
	}
	w.cycle(ctx)
	if d := cmp.Diff([]string{"parent"}, w.held()); d != "" {
		t.Fatalf("held before the parent ended (-want +got):\n%s", d)
	}
	if err := w.c.Commit(ctx, "parent", checkpointer.ShardEnd); err != nil {
		t.Fatal(err)
	}
	w.cycle(ctx)
	if d := cmp.Diff([]string{"child-1", "child-2"}, w.held()); d != "" {
		t.Errorf("held after the parent ended (-want +got):\n%s", d)
	}
}
