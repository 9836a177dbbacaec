package dynamolog

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/attempt"
)

// DefaultAttemptTimeout is Config.AttemptTimeout's default: a put of the
// largest entry (380 KB) answers well within it on a healthy connection.
const DefaultAttemptTimeout = 5 * time.Second

// timedClient bounds each attempt of every call of a Client (see
// attempt.Middleware) through the per-call options, as *dynamodb.Client
// applies them.
type timedClient struct {
	c    Client
	opts []func(*dynamodb.Options)
}

// withAttemptTimeout returns c with every attempt of its calls bounded by d
// on clk.
func withAttemptTimeout(c Client, clk clock.Clock, d time.Duration) Client {
	mw := attempt.Middleware(clk, d)
	return timedClient{c: c, opts: []func(*dynamodb.Options){func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, mw) }}}
}

func (t timedClient) with(opts []func(*dynamodb.Options)) []func(*dynamodb.Options) {
	out := make([]func(*dynamodb.Options), 0, len(opts)+len(t.opts))
	return append(append(out, opts...), t.opts...)
}

func (t timedClient) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, o ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	return t.c.DescribeTable(ctx, in, t.with(o)...)
}

func (t timedClient) CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, o ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	return t.c.CreateTable(ctx, in, t.with(o)...)
}

func (t timedClient) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return t.c.PutItem(ctx, in, t.with(o)...)
}

func (t timedClient) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return t.c.GetItem(ctx, in, t.with(o)...)
}

func (t timedClient) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return t.c.Query(ctx, in, t.with(o)...)
}

func (t timedClient) BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	return t.c.BatchWriteItem(ctx, in, t.with(o)...)
}
