package kinesis

import (
	"context"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/weirstream/weir/internal/awsconf"
)

// Client is the part of the Kinesis API the receiver calls. *kinesis.Client
// of aws-sdk-go-v2 implements it; tests wrap one to inject faults.
type Client interface {
	// DescribeStreamSummary checks the stream exists before reading starts.
	DescribeStreamSummary(ctx context.Context, in *awskinesis.DescribeStreamSummaryInput, optFns ...func(*awskinesis.Options)) (*awskinesis.DescribeStreamSummaryOutput, error)
	// ListShards lists the stream's shards, page by page.
	ListShards(ctx context.Context, in *awskinesis.ListShardsInput, optFns ...func(*awskinesis.Options)) (*awskinesis.ListShardsOutput, error)
	// GetShardIterator positions a reader in a shard.
	GetShardIterator(ctx context.Context, in *awskinesis.GetShardIteratorInput, optFns ...func(*awskinesis.Options)) (*awskinesis.GetShardIteratorOutput, error)
	// GetRecords reads records from an iterator.
	GetRecords(ctx context.Context, in *awskinesis.GetRecordsInput, optFns ...func(*awskinesis.Options)) (*awskinesis.GetRecordsOutput, error)
}

// newDefaultClient builds the SDK client from cfg.AWS (or the default AWS
// configuration) and cfg.Endpoint, with the SDK's retries off: the receiver
// does its own, on its clock, and counts them.
func newDefaultClient(ctx context.Context, cfg Config) (Client, error) {
	awsCfg, err := awsconf.Load(ctx, cfg.AWS, "Kinesis (set Config.AWS or Config.Client to avoid it)")
	if err != nil {
		return nil, fmt.Errorf("kinesis: %w", err)
	}
	if err := awsconf.CheckRegion(awsCfg, cfg.Endpoint, "Kinesis"); err != nil {
		return nil, fmt.Errorf("kinesis: %w", err)
	}
	return awskinesis.NewFromConfig(awsCfg, func(o *awskinesis.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.Retryer = aws.NopRetryer{}
	}), nil
}

// endpointOf returns, for warnings, the endpoint client sends its calls to:
// for the default client, Config.Endpoint, or the one the AWS
// configuration gives (AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_KINESIS, or a
// profile's endpoint_url), "" if none does (AWS's for the region); for a
// Config.Client, its BaseEndpoint, or the one the SDK resolves for its
// region, and "the given Client" when it does not show its options (a
// wrapper), since a Config.Client ignores Config.Endpoint.
func endpointOf(cfg Config, client Client) string {
	if cfg.Client == nil {
		if c, ok := client.(interface{ Options() awskinesis.Options }); ok && cfg.Endpoint == "" {
			return aws.ToString(c.Options().BaseEndpoint)
		}
		return cfg.Endpoint
	}
	c, ok := client.(interface{ Options() awskinesis.Options })
	if !ok {
		return "the given Client"
	}
	o := c.Options()
	if o.BaseEndpoint != nil {
		return *o.BaseEndpoint
	}
	r := o.EndpointResolverV2
	if r == nil {
		r = awskinesis.NewDefaultEndpointResolverV2()
	}
	// Resolving does no I/O: it applies the SDK's rules to the region.
	ep, err := r.ResolveEndpoint(context.Background(), awskinesis.EndpointParameters{Region: aws.String(o.Region)})
	if o.Region == "" || err != nil {
		return "the given Client (no endpoint resolved for region " + strconv.Quote(o.Region) + ")"
	}
	return ep.URI.String()
}

// placeOf names, for the error of a stream not found, where client looked
// for it: the endpoint (see endpointOf; for the default client with none
// set, the one the SDK resolves for its region) and the region, when the
// client shows its options.
func placeOf(cfg Config, client Client) string {
	ep := endpointOf(cfg, client)
	c, ok := client.(interface{ Options() awskinesis.Options })
	if !ok {
		return ep
	}
	o := c.Options()
	if ep == "" {
		ep = "the AWS endpoint of the region"
		r := o.EndpointResolverV2
		if r == nil {
			r = awskinesis.NewDefaultEndpointResolverV2()
		}
		// Resolving does no I/O: it applies the SDK's rules to the region.
		if e, err := r.ResolveEndpoint(context.Background(), awskinesis.EndpointParameters{Region: aws.String(o.Region)}); err == nil {
			ep = e.URI.String()
		}
	}
	return ep + " (region " + strconv.Quote(o.Region) + ")"
}

// credentialRefresher returns a function that drops the credentials client
// caches, so that its next request signs with fresh ones (after an
// expired-token answer), or nil when client is not the SDK's or its
// credentials are not cached.
func credentialRefresher(client Client) func() {
	c, ok := client.(*awskinesis.Client)
	if !ok {
		return nil
	}
	if cache, ok := c.Options().Credentials.(interface{ Invalidate() }); ok {
		return cache.Invalidate
	}
	return nil
}

// streamRef addresses a stream by name or ARN in requests.
type streamRef string

func (s streamRef) name() *string {
	if isARN(string(s)) {
		return nil
	}
	return aws.String(string(s))
}

func (s streamRef) arn() *string {
	if isARN(string(s)) {
		return aws.String(string(s))
	}
	return nil
}
