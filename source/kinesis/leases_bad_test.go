package kinesis_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/weirstream/weir/internal/lease"
)

// TestLeasesBadItemsIsolated hand-writes lease items a worker cannot use
// (defects 3 and 4 of the reliability review): a leaseCounter stored as a
// string, a checkpoint that is no sequence number ("garbage!"), a
// checkpoint past every record (2^128-1), and an item of no shard whose
// leaseOwner is a number. The worker reads the healthy shard, reports each
// bad one with its fix, counts them, never delivers from a refused shard
// nor stops; once an operator fixes the checkpoints, those shards are read
// from where the fix says.
func TestLeasesBadItemsIsolated(t *testing.T) {
	t.Parallel()
	f := newFleet(t, 4)
	f.put(payloads("old", 200))
	recs := f.readAll()
	shards := make([]string, 0, len(recs))
	for s := range recs {
		shards = append(shards, s)
	}
	slices.Sort(shards)
	if len(shards) != 4 {
		t.Fatalf("%d shards with records, want 4", len(shards))
	}
	payloadsOf := func(shard string) []string {
		var out []string
		for _, r := range recs[shard] {
			out = append(out, string(r.Data))
		}
		return out
	}
	ensureTable(t, f)
	n := func(v string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberN{Value: v} }
	s := func(v string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberS{Value: v} }
	lease := func(shard string, edit map[string]ddbtypes.AttributeValue) {
		item := map[string]ddbtypes.AttributeValue{
			"leaseKey": s(shard), "leaseCounter": n("3"), "checkpoint": s("TRIM_HORIZON"),
			"checkpointSubSequenceNumber": n("0"), "ownerSwitchesSinceCheckpoint": n("0"),
		}
		for k, v := range edit {
			item[k] = v
		}
		if _, err := f.env.DynamoDB().PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(f.table), Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	const maxSeq = "340282366920938463463374607431768211455" // 2^128-1
	lease(shards[0], map[string]ddbtypes.AttributeValue{"leaseCounter": s("3")})
	lease(shards[1], map[string]ddbtypes.AttributeValue{"checkpoint": s("garbage!")})
	lease(shards[2], map[string]ddbtypes.AttributeValue{"checkpoint": s(maxSeq)})
	lease("shardId-of-another-stream", map[string]ddbtypes.AttributeValue{"leaseOwner": n("12")})

	w := f.start("w", time.Second, nil)
	f.waitFor("the healthy shard delivered and every bad item reported", func() bool {
		seen := f.delivered()
		for _, p := range payloadsOf(shards[3]) {
			if seen[p] == 0 {
				return false
			}
		}
		st := w.r.Stats()
		return st.BadLeaseItems == 3 && st.RefusedShards == 1
	})
	more := payloads("new", 100)
	f.put(more)
	var newOnHealthy []string
	for _, r := range f.readAll()[shards[3]] {
		if strings.HasPrefix(string(r.Data), "new-") {
			newOnHealthy = append(newOnHealthy, string(r.Data))
		}
	}
	f.waitFor("new records of the healthy shard delivered", func() bool {
		seen := f.delivered()
		for _, p := range newOnHealthy {
			if seen[p] == 0 {
				return false
			}
		}
		return true
	})
	select {
	case <-w.done:
		t.Fatalf("the worker stopped: %v", w.runErr)
	default:
	}
	seen := f.delivered()
	for _, shard := range shards[:3] {
		for _, p := range payloadsOf(shard) {
			if seen[p] != 0 {
				t.Errorf("%q of bad shard %s delivered", p, shard)
			}
		}
	}
	var reports []string
	for _, err := range w.reported() {
		reports = append(reports, err.Error())
	}
	for _, want := range []string{shards[0], shards[1], shards[2], "shardId-of-another-stream"} {
		i := slices.IndexFunc(reports, func(r string) bool {
			return strings.Contains(r, fmt.Sprintf("leaseKey=%q", want)) && strings.Contains(r, "fix: ")
		})
		if i < 0 {
			t.Errorf("no report names item %s and its fix; reports:\n%s", want, strings.Join(reports, "\n"))
		}
	}
	if l := f.leases()[shards[2]]; l.Owner != "" || l.Checkpoint != maxSeq {
		t.Errorf("refused lease %s: %+v, want unowned, checkpoint kept", shards[2], l)
	}

	// The operator fixes two items as the reports say: both are read.
	fix := func(shard string) {
		_, err := f.env.DynamoDB().UpdateItem(t.Context(), &dynamodb.UpdateItemInput{
			TableName: aws.String(f.table), Key: map[string]ddbtypes.AttributeValue{"leaseKey": s(shard)},
			UpdateExpression:          aws.String("SET #c = :c"),
			ExpressionAttributeNames:  map[string]string{"#c": "checkpoint"},
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":c": s("TRIM_HORIZON")},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	fix(shards[1])
	fix(shards[2])
	f.waitFor("the fixed shards delivered", func() bool {
		seen := f.delivered()
		for _, shard := range shards[1:3] {
			for _, p := range payloadsOf(shard) {
				if seen[p] == 0 {
					return false
				}
			}
		}
		return w.r.Stats().BadLeaseItems == 2
	})
	w.drain(t)
}

// ensureTable creates the fleet's lease table as weir does.
func ensureTable(t *testing.T, f *fleet) {
	t.Helper()
	tbl, err := lease.NewTable(lease.TableConfig{Name: f.table, Client: f.env.DynamoDB(), PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := tbl.Ensure(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestLeasesRefusedCheckpointFixedIsCheckpointed refuses a shard whose
// checkpoint is past every record (57 digits; Kinesis's have 56), then
// fixes it as the report says (TRIM_HORIZON): the shard is read again and
// checkpointed as it goes, the refused number being no floor for the
// checkpoints of the new hold (it was one: none was written until the
// shard's numbers passed it, so a restart read the whole shard again).
func TestLeasesRefusedCheckpointFixedIsCheckpointed(t *testing.T) {
	t.Parallel()
	f := newFleet(t, 1)
	data := payloads("r", 50)
	f.put(data)
	shard := ""
	for s := range f.readAll() {
		shard = s
	}
	ensureTable(t, f)
	pastAll := strings.Repeat("9", 57)
	s := func(v string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberS{Value: v} }
	n := func(v string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberN{Value: v} }
	_, err := f.env.DynamoDB().PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(f.table), Item: map[string]ddbtypes.AttributeValue{
		"leaseKey": s(shard), "leaseCounter": n("3"), "checkpoint": s(pastAll),
		"checkpointSubSequenceNumber": n("0"), "ownerSwitchesSinceCheckpoint": n("0"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	w := f.start("w", time.Second, nil)
	f.waitFor("the shard refused", func() bool { return w.r.Stats().RefusedShards == 1 })
	_, err = f.env.DynamoDB().UpdateItem(t.Context(), &dynamodb.UpdateItemInput{
		TableName: aws.String(f.table), Key: map[string]ddbtypes.AttributeValue{"leaseKey": s(shard)},
		UpdateExpression:          aws.String("SET #c = :c"),
		ExpressionAttributeNames:  map[string]string{"#c": "checkpoint"},
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":c": s("TRIM_HORIZON")},
	})
	if err != nil {
		t.Fatal(err)
	}
	f.waitFor("the fixed shard delivered", f.allDelivered(data))
	last := f.lastSeqs()[shard]
	f.waitFor("the fixed shard checkpointed at its last record", func() bool {
		return f.leases()[shard].Checkpoint == last
	})
	w.drain(t)
}
