package dynamolog_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/weirstream/weir/internal/localaws"
	"github.com/weirstream/weir/recovery/dynamolog"
)

// panickingQuery is dynalite's client with a Query that panics, as a
// user's wrapper with a bug may.
type panickingQuery struct{ dynamolog.Client }

func (panickingQuery) Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	panic("wrapper bug")
}

// TestClientPanic checks that a log's client that panics fails the call
// with an error naming it, rather than crashing the process from the
// driver's goroutines (dynalite).
func TestClientPanic(t *testing.T) {
	env := localaws.ForTest(t, localaws.Options{DynamoDB: true})
	cfg := dynamolog.Config{Client: panickingQuery{env.DynamoDB()}, Table: table, Name: localaws.UniqueName(t)}
	l, err := cfg.Open(t.Context())
	if err == nil {
		_, err = l.Read(t.Context())
		l.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "the DynamoDB client panicked in Query: panic: wrapper bug") {
		t.Errorf("Open and read = %v, want the client's panic as its error", err)
	}
}
