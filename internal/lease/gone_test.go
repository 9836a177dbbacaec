package lease

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/weirstream/weir/internal/localaws"
)

// TestLeaseTableDeletedStopsRun deletes the lease table (dynalite) while
// a worker's Run holds leases of it: the next periodic call DynamoDB
// refuses with ResourceNotFoundException ends Run with an error naming
// the table, that it is gone, and the fix. Before, Run went on for good:
// the leases lapsed, nothing was read again, and the one warning per kind
// of call said to allow the actions of the IAM policy.
func TestLeaseTableDeletedStopsRun(t *testing.T) {
	ctx := t.Context()
	db := servers.Env(t).DynamoDB()
	table := localaws.UniqueName(t)
	w, acquired, runErr := runWorker(t, db, table, "w", 2)
	guard := time.NewTimer(time.Minute) // a bound on condition waits, not a timing assertion
	defer guard.Stop()
	for range 2 {
		select {
		case <-acquired:
		case err := <-runErr:
			t.Fatalf("Run returned before taking the leases: %v", err)
		case <-guard.C:
			t.Fatal("the leases were not taken")
		}
	}
	if _, err := db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)}); err != nil {
		t.Fatal(err)
	}
	// The renew, shard sync and take tickers: the next renewal is the
	// first call after the deletion.
	if err := w.clk.WaitForWaiters(ctx, 3); err != nil {
		t.Fatal(err)
	}
	w.clk.Advance(w.c.cfg.RenewInterval)
	select {
	case err := <-runErr:
		if err == nil {
			t.Fatal("Run = nil once the lease table was deleted, want an error")
		}
		for _, want := range []string{table, "no longer exists", "deleted", "fix:"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("Run = %v\nwant it to say %q", err, want)
			}
		}
	case <-guard.C:
		t.Fatal("Run still runs a minute after the lease table was deleted")
	}
}
