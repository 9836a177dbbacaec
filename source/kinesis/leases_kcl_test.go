package kinesis_test

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/lease"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/kpl"
	"github.com/weirstream/weir/source/kinesis"
)

// userRecord is one user record of a shard, as the stream holds it.
type userRecord struct {
	data string
	seq  string
	sub  int
}

// userRecords de-aggregates a shard's Kinesis records, in order.
func userRecords(t *testing.T, recs []kintypes.Record) []userRecord {
	t.Helper()
	var out []userRecord
	for _, r := range recs {
		urs, _, err := kpl.Deaggregate(r.Data, aws.ToString(r.PartitionKey))
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range urs {
			out = append(out, userRecord{data: string(u.Data), seq: aws.ToString(r.SequenceNumber), sub: int(u.SubSequence)})
		}
	}
	return out
}

// bounds is how many times a payload may be delivered.
type bounds struct{ min, max int }

// TestLeasesTakeOverAKCLTable takes over a lease table a KCL application
// wrote, one shard per kind of checkpoint, and checks what is delivered of
// each shard: nothing before the checkpoint; of the record at it, what
// the KCL checkpoint does not cover, as the KCL reads it (a plain record
// nothing, an aggregate checkpointed at sub-sequence s the user records
// after s, one of weir's own checkpoints nothing); everything after, once.
func TestLeasesTakeOverAKCLTable(t *testing.T) {
	t.Parallel()
	f := newFleet(t, 4)
	var data [][]byte
	for i := range 240 {
		if i%4 != 1 {
			data = append(data, fmt.Appendf(nil, "kcl-%03d", i))
			continue
		}
		var users []kpl.UserRecord
		for u := range 4 {
			users = append(users, kpl.UserRecord{PartitionKey: key(i), Data: fmt.Appendf(nil, "kcl-%03d/%d", i, u)})
		}
		data = append(data, kpl.Aggregate(users))
	}
	f.put(data)
	recs := f.readAll()
	shards := make([]string, 0, len(recs))
	for s := range recs {
		shards = append(shards, s)
	}
	slices.Sort(shards)
	if len(shards) != 4 {
		t.Fatalf("%d shards with records, want 4", len(shards))
	}

	cases := []struct {
		name      string
		aggregate bool  // the checkpoint is on an aggregate
		sub       int64 // checkpointSubSequenceNumber
		weir      bool  // weir wrote the checkpoint
		at        func(sub int) bounds
	}{
		{"KCL, plain record", false, 0, false, func(int) bounds { return bounds{0, 0} }},
		{"KCL, aggregate, sub-sequence 0", true, 0, false, func(sub int) bounds {
			if sub == 0 {
				return bounds{0, 0}
			}
			return bounds{1, 1}
		}},
		{"KCL, inside an aggregate", true, 2, false, func(sub int) bounds {
			if sub <= 2 {
				return bounds{0, 0}
			}
			return bounds{1, 1}
		}},
		{"weir", true, 0, true, func(int) bounds { return bounds{0, 0} }},
	}
	want := map[string]bounds{}
	first := map[string]string{} // shard -> checkpoint written
	for i, tc := range cases {
		shard := shards[i]
		ck := checkpointRecord(t, recs[shard], tc.aggregate)
		first[shard] = ck
		weirCk := ""
		if tc.weir {
			weirCk = ck
		}
		writeKCLLease(t, f, shard, ck, tc.sub, weirCk)
		for _, u := range userRecords(t, recs[shard]) {
			switch c := batch.CompareSeq(u.seq, ck); {
			case c < 0:
				want[u.data] = bounds{0, 0}
			case c == 0:
				want[u.data] = tc.at(u.sub)
			default:
				want[u.data] = bounds{1, 1}
			}
		}
		t.Logf("%s: shard %s, checkpoint %s/%d", tc.name, shard, ck, tc.sub)
	}

	// Leases of 5s (each DynamoDB attempt bounded by 1s): with 1s leases a
	// loaded machine timed out the takes' and renewals' 200ms attempts and
	// the heir lost what it took, until the deadline passed.
	w := f.start("heir", 5*time.Second, func(c *kinesis.Config) { c.InitialPosition = kinesis.Latest })
	f.waitFor("w holds every KCL lease", func() bool { return len(w.held()) == 4 })
	more := payloads("new", 200)
	f.put(more)
	for _, p := range more {
		want[string(p)] = bounds{1, 1}
	}
	f.waitFor("every record after the checkpoints delivered", func() bool {
		seen := f.delivered()
		for p, b := range want {
			if seen[p] < b.min {
				return false
			}
		}
		return true
	})
	w.drain(t)
	got := map[string]int{}
	for _, r := range w.records() {
		got[string(r.Data)]++
	}
	for p, n := range got {
		if b, ok := want[p]; !ok || n < b.min || n > b.max {
			t.Errorf("%q delivered %d times, want %d to %d", p, n, b.min, b.max)
		}
	}
	for p, b := range want {
		if got[p] < b.min {
			t.Errorf("%q delivered %d times, want at least %d", p, got[p], b.min)
		}
	}
	for shard, l := range f.leases() {
		if l.Owner != "" || !l.WrittenByWeir() || batch.CompareSeq(l.Checkpoint, first[shard]) <= 0 {
			t.Errorf("shard %s after drain: %+v; want no owner and weir's checkpoint past the first", shard, l)
		}
	}
}

// checkpointRecord returns the sequence number of a record in the second
// half of recs, an aggregate or not.
func checkpointRecord(t *testing.T, recs []kintypes.Record, aggregate bool) string {
	t.Helper()
	for _, r := range recs[len(recs)/2:] {
		if _, agg, _ := kpl.Deaggregate(r.Data, aws.ToString(r.PartitionKey)); agg == aggregate {
			return aws.ToString(r.SequenceNumber)
		}
	}
	t.Fatalf("no record with aggregate %v in the second half of the shard", aggregate)
	return ""
}

// writeKCLLease writes a lease item as the KCL does, owned by a worker
// that is gone, creating the table as the KCL does if needed; weirCk, when
// not empty, is the weirCheckpoint attribute weir would have written.
func writeKCLLease(t *testing.T, f *fleet, shard, seq string, subSeq int64, weirCk string) {
	t.Helper()
	ctx := t.Context()
	db := f.env.DynamoDB()
	_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(f.table),
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("leaseKey"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("leaseKey"), KeyType: ddbtypes.KeyTypeHash}},
		BillingMode:          ddbtypes.BillingModePayPerRequest,
	})
	var inUse *ddbtypes.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		t.Fatal(err)
	}
	tbl, err := lease.NewTable(lease.TableConfig{Name: f.table, Client: db, PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := tbl.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	n := func(v string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberN{Value: v} }
	s := func(v string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberS{Value: v} }
	item := map[string]ddbtypes.AttributeValue{
		"leaseKey":                     s(shard),
		"leaseOwner":                   s("kcl-worker-that-died"),
		"leaseCounter":                 n("41"),
		"checkpoint":                   s(seq),
		"checkpointSubSequenceNumber":  n(strconv.FormatInt(subSeq, 10)),
		"ownerSwitchesSinceCheckpoint": n("2"),
	}
	if weirCk != "" {
		item["weirCheckpoint"] = s(weirCk)
	}
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(f.table), Item: item}); err != nil {
		t.Fatal(err)
	}
}
