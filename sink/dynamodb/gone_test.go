package dynamodb_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"

	"github.com/weirstream/weir/internal/letters/letterstest"
	"github.com/weirstream/weir/sink/dynamodb"
	"github.com/weirstream/weir/stream"
)

// deniedWrites is a Client whose writes are refused as AWS refuses a call
// the credentials may not make.
type deniedWrites struct{ dynamodb.Client }

func (deniedWrites) UpdateItem(context.Context, *ddb.UpdateItemInput, ...func(*ddb.Options)) (*ddb.UpdateItemOutput, error) {
	return nil, &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "not authorized", Fault: smithy.FaultClient}
}

func (deniedWrites) PutItem(context.Context, *ddb.PutItemInput, ...func(*ddb.Options)) (*ddb.PutItemOutput, error) {
	return nil, &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "not authorized", Fault: smithy.FaultClient}
}

// switchable is a Client that sends each call to the client set last.
type switchable struct {
	to atomic.Pointer[dynamodb.Client]
}

func (s *switchable) set(c dynamodb.Client) { s.to.Store(&c) }

func (s *switchable) DescribeTable(ctx context.Context, in *ddb.DescribeTableInput, o ...func(*ddb.Options)) (*ddb.DescribeTableOutput, error) {
	return (*s.to.Load()).DescribeTable(ctx, in, o...)
}

func (s *switchable) PutItem(ctx context.Context, in *ddb.PutItemInput, o ...func(*ddb.Options)) (*ddb.PutItemOutput, error) {
	return (*s.to.Load()).PutItem(ctx, in, o...)
}

func (s *switchable) UpdateItem(ctx context.Context, in *ddb.UpdateItemInput, o ...func(*ddb.Options)) (*ddb.UpdateItemOutput, error) {
	return (*s.to.Load()).UpdateItem(ctx, in, o...)
}

// TestTableRefusalStopsAtOnce: a Sink whose table is deleted while the
// pipeline runs (dynalite), or whose writes the credentials may not make,
// stops Run at once with the refusal and its fix, with or without
// stream.Quarantine. Before, the output was tried again (a "trying again"
// WARN per retry) and then failed advising stream.Quarantine, or, with
// Quarantine, every batch's records went to the dead letters, four WARNs
// a batch, for as long as the pipeline ran.
func TestTableRefusalStopsAtOnce(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		refuse func(t *testing.T, c *ddb.Client, table string) dynamodb.Client
		want   string
	}{
		{"table deleted", func(t *testing.T, c *ddb.Client, table string) dynamodb.Client {
			if _, err := c.DeleteTable(t.Context(), &ddb.DeleteTableInput{TableName: aws.String(table)}); err != nil {
				t.Fatal(err)
			}
			return c
		}, "does not exist"},
		{"access denied", func(_ *testing.T, c *ddb.Client, _ string) dynamodb.Client {
			return deniedWrites{c}
		}, "allow dynamodb:"},
	} {
		for _, quarantine := range []bool{false, true} {
			name := c.name
			if quarantine {
				name += " quarantine"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				client, table, _ := setup(t)
				// New checks the table: it is refused only afterwards.
				sw := &switchable{}
				sw.set(client)
				s := newSink(t, t.Context(), dynamodb.Config{Client: sw, Table: table})
				sw.set(c.refuse(t, client, table))
				box := &letterstest.Box{}
				var opts []stream.Option
				if quarantine {
					opts = append(opts, stream.Quarantine(box))
				}
				var logs logBuffer
				err := runOutputs(t, &logs, false, events(12, 4, false), func(in *stream.Stream[event]) {
					stream.ForEachBatch(in, s.Write, opts...)
				})
				if err == nil {
					t.Fatalf("Run = nil, want the refusal; %d records quarantined", len(box.Letters()))
				}
				for _, w := range []string{table, c.want, "fix:"} {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("Run = %v\nwant it to say %q", err, w)
					}
				}
				if strings.Contains(err.Error(), "stream.Quarantine") {
					t.Errorf("Run = %v\nadvises Quarantine for a refusal of the whole table", err)
				}
				if n := len(box.Letters()); n > 0 {
					t.Errorf("%d records quarantined for a refusal of the whole table, want none", n)
				}
				if got := logs.String(); strings.Contains(got, "trying again") {
					t.Errorf("the refusal was tried again before Run failed:\n%s", got)
				}
			})
		}
	}
}
