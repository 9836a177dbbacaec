package localaws

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/weirstream/weir/localaws"
)

// Env, Options and the names below are those of the public package
// github.com/weirstream/weir/localaws, which holds the implementation; they
// are repeated here so that weir's tests import one package for the servers
// and the test helpers of this one.
type (
	// Env is localaws.Env.
	Env = localaws.Env
	// Options is localaws.Options.
	Options = localaws.Options
)

// Environment variables and the region of localaws.
const (
	EnvKinesisEndpoint     = localaws.EnvKinesisEndpoint
	EnvDynamoDBEndpoint    = localaws.EnvDynamoDBEndpoint
	EnvKinesisMockEndpoint = localaws.EnvKinesisMockEndpoint
	EnvDir                 = localaws.EnvDir
	Region                 = localaws.Region
)

// ErrNotLoopback is localaws.ErrNotLoopback.
var ErrNotLoopback = localaws.ErrNotLoopback

// Start is localaws.Start.
func Start(ctx context.Context, opts Options) (*Env, error) { return localaws.Start(ctx, opts) }

// ForTest is localaws.ForTest.
func ForTest(tb testing.TB, opts Options) *Env {
	tb.Helper()
	return localaws.ForTest(tb, opts)
}

// CreateStreamOn is localaws.CreateStreamOn.
func CreateStreamOn(ctx context.Context, c *kinesis.Client, name string, shards int) error {
	return localaws.CreateStreamOn(ctx, c, name, shards)
}

// PutRecordsOn is localaws.PutRecordsOn.
func PutRecordsOn(ctx context.Context, c *kinesis.Client, stream string, records [][]byte, partitionKey func(i int) string) error {
	return localaws.PutRecordsOn(ctx, c, stream, records, partitionKey)
}
