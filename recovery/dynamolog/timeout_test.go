package dynamolog_test

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/weirstream/weir/internal/localaws"
	"github.com/weirstream/weir/internal/localaws/faults"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/internal/recoverylog/logtest"
	"github.com/weirstream/weir/recovery/dynamolog"
)

// TestDynamoSilentAttemptIsRetried checks, against dynalite, that an append
// whose first put gets no answer (a silent connection) is abandoned after
// AttemptTimeout and retried, and lands once.
func TestDynamoSilentAttemptIsRetried(t *testing.T) {
	env := localaws.ForTest(t, localaws.Options{DynamoDB: true})
	tr, err := faults.New(faults.Config{})
	if err != nil {
		t.Fatal(err)
	}
	client := env.DynamoDB(func(o *dynamodb.Options) { o.HTTPClient = tr })
	cfg := dynamolog.Config{Client: client, Table: table, Name: localaws.UniqueName(t), AttemptTimeout: 100 * time.Millisecond}
	l := openDynamo(t, cfg)
	if err := tr.SetRules(faults.Rule{Operation: "PutItem", Kind: faults.Hang, Times: 1}); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, block(0, 0))
	if n := tr.Injected("PutItem", faults.Hang); n != 1 {
		t.Fatalf("%d PutItem calls held, want 1", n)
	}
	logtest.Check(t, openDynamo(t, cfg), []recoverylog.Entry{block(0, 0)})
}

// TestDynamoOpenThroughOutage checks, against dynalite, that opening a log
// while DynamoDB does not answer (reads dropped, then a claim that lands
// but whose answer is lost) waits for it and claims the log once.
func TestDynamoOpenThroughOutage(t *testing.T) {
	_, tr, cfg := faultyLog(t)
	mustAppend(t, openDynamo(t, cfg), block(0, 0))
	if err := tr.SetRules(
		faults.Rule{Operation: "Query", Kind: faults.DropRequest, Times: 3},
		faults.Rule{Operation: "PutItem", Kind: faults.DropResponse, Times: 1},
	); err != nil {
		t.Fatal(err)
	}
	l := openDynamo(t, cfg)
	if n := tr.Injected("", 0); n != 4 {
		t.Fatalf("%d faults injected, want 4", n)
	}
	mustAppend(t, l, block(0, 1))
	logtest.Check(t, openDynamo(t, cfg), []recoverylog.Entry{block(0, 0), block(0, 1)})
}
