package lease

import (
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/weirstream/weir/checkpoint/leasetable"
)

// TestOpenTable checks that OpenTable, the way kinesismetrics lists a
// table, wants the table's name (the receiver's default, its App, is not
// known there), refuses a bad name or endpoint with ErrInvalidConfig
// naming the field, and uses the client it is given.
func TestOpenTable(t *testing.T) {
	db := dynamodb.New(dynamodb.Options{Region: "us-east-1"}) // no call is made
	for _, tc := range []struct {
		name string
		cfg  leasetable.Config
		want string // "" for no error
	}{
		{"no name", leasetable.Config{DynamoDB: db}, "TableName is empty"},
		{"bad name", leasetable.Config{TableName: "a b", DynamoDB: db}, "TableName: table name"},
		{"bad endpoint", leasetable.Config{TableName: "leases", Endpoint: "127.0.0.1:4568"}, "Endpoint"},
		{"client with an endpoint", leasetable.Config{TableName: "leases", DynamoDB: db, Endpoint: "http://127.0.0.1:4568"}, "DynamoDB is set with Endpoint"},
		{"ok", leasetable.Config{TableName: "leases", DynamoDB: db}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tbl, err := OpenTable(t.Context(), tc.cfg)
			if tc.want == "" {
				if err != nil || tbl.Name() != tc.cfg.TableName || tbl.given != tc.cfg.DynamoDB {
					t.Fatalf("OpenTable = %v, %v; want table %s with the given client", tbl, err, tc.cfg.TableName)
				}
				return
			}
			if !errors.Is(err, leasetable.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("OpenTable = %v, want ErrInvalidConfig naming %q", err, tc.want)
			}
		})
	}
}
