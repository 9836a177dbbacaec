package lease

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/internal/localaws"
)

// panickingGet is dynalite's client with a GetItem that panics, as a
// user's wrapper with a bug may.
type panickingGet struct{ leasetable.DynamoDBAPI }

func (panickingGet) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	panic("wrapper bug")
}

// TestTableClientPanic checks that a lease table client that panics fails
// the call with an error naming it, rather than crashing the process from
// the coordinator's goroutines (dynalite).
func TestTableClientPanic(t *testing.T) {
	db := panickingGet{servers.Env(t).DynamoDB()}
	tbl, err := NewTable(TableConfig{Name: localaws.UniqueName(t), Client: db, PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := tbl.Ensure(t.Context()); err != nil {
		t.Fatal(err)
	}
	_, _, err = tbl.Get(t.Context(), "s")
	if err == nil || !strings.Contains(err.Error(), "the DynamoDB client panicked in GetItem: panic: wrapper bug") {
		t.Errorf("Get = %v, want the client's panic as its error", err)
	}
}
