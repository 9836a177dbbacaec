// Package awsconf builds the AWS SDK clients weir makes when a user gives
// an endpoint or an AWS configuration instead of a client: one place for
// the DynamoDB clients of the lease table, the recovery log and the DynamoDB
// sink, and for loading the AWS configuration of those and of the Kinesis
// clients (the receiver's, repartition's).
package awsconf

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// Load returns a copy of cfg, or the default AWS configuration (environment,
// shared files, instance role) when cfg is nil. what names the client it is
// for, in the error.
func Load(ctx context.Context, cfg *aws.Config, what string) (aws.Config, error) {
	if cfg != nil {
		return cfg.Copy(), nil
	}
	loaded, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return aws.Config{}, fmt.Errorf("loading the default AWS configuration for %s: %w", what, err)
	}
	return loaded, nil
}

// CheckRegion reports, naming what and the fix, an AWS configuration the
// SDK could send no call with: no region and no endpoint, neither endpoint
// nor one of cfg's own (the SDK's error, at the first call, says only
// "Missing Region").
func CheckRegion(cfg aws.Config, endpoint, what string) error {
	//lint:ignore SA1019 a resolver set there still gives the endpoint
	resolver := cfg.EndpointResolverWithOptions != nil || cfg.EndpointResolver != nil
	if cfg.Region != "" || endpoint != "" || cfg.BaseEndpoint != nil || resolver {
		return nil
	}
	return fmt.Errorf("no AWS region for %s: set AWS_REGION (or the region in the shared AWS config file), the Region of the aws.Config given to weir, or an endpoint", what)
}

// DynamoDB returns a DynamoDB client from cfg (see Load) whose endpoint is
// endpoint when it is not empty; without a region and an endpoint, an
// error (see CheckRegion).
func DynamoDB(ctx context.Context, cfg *aws.Config, endpoint, what string) (*dynamodb.Client, error) {
	awsCfg, err := Load(ctx, cfg, what)
	if err != nil {
		return nil, err
	}
	client, _, _ := strings.Cut(what, " (") // without the hint for Load
	if err := CheckRegion(awsCfg, endpoint, client); err != nil {
		return nil, err
	}
	return dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	}), nil
}

// CheckEndpoint reports a problem with an endpoint URL, naming field, or nil
// if it is empty or starts with http:// or https://.
func CheckEndpoint(field, endpoint string) error {
	if endpoint != "" && !strings.HasPrefix(endpoint, "http://") && !strings.HasPrefix(endpoint, "https://") {
		return fmt.Errorf("%s %q: must be a URL starting with http:// or https://", field, endpoint)
	}
	return nil
}

// CheckStream reports a Kinesis stream name or ARN that Kinesis would
// refuse (a name is 1 to 128 of a-z A-Z 0-9 _ . -, an ARN
// arn:PARTITION:kinesis:REGION:ACCOUNT:stream/NAME), naming the field Stream,
// or nil. An empty s is the caller's to report.
func CheckStream(s string) error {
	if strings.HasPrefix(s, "arn:") {
		if _, ok := StreamNameOfARN(s); !ok {
			return fmt.Errorf("Stream %q: an ARN must look like arn:aws:kinesis:REGION:ACCOUNT:stream/NAME", s)
		}
		return nil
	}
	if len(s) > 128 {
		return fmt.Errorf("Stream %q: a stream name has at most 128 characters", s)
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-') {
			return fmt.Errorf("Stream %q: a stream name may hold only letters, digits, '_', '.' and '-'", s)
		}
	}
	return nil
}

// StreamNameOfARN returns the stream name at the end of a Kinesis stream
// ARN, and whether arn is one.
func StreamNameOfARN(arn string) (string, bool) {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 || parts[2] != "kinesis" {
		return "", false
	}
	name, ok := strings.CutPrefix(parts[5], "stream/")
	if !ok || name == "" || strings.Contains(name, "/") {
		return "", false
	}
	return name, true
}

// CheckClient reports a client (the field named client, set if given)
// configured together with settings that only the default client is built
// from (an AWS configuration, if awsSet, and an endpoint), which would be
// ignored: calls meant for a local server would go to AWS. It returns nil
// when there is no such conflict.
func CheckClient(client string, given, awsSet bool, endpoint string) error {
	var set []string
	if awsSet {
		set = append(set, "AWS")
	}
	if endpoint != "" {
		set = append(set, "Endpoint")
	}
	if !given || len(set) == 0 {
		return nil
	}
	return fmt.Errorf("%s is set with %s, settings only the default client is built from, which would be ignored: configure the client itself (an endpoint is its BaseEndpoint option), or leave %s nil",
		client, strings.Join(set, " and "), client)
}

// DynamoDBEndpoint returns, for logs, the endpoint a DynamoDB client sends
// its calls to: its BaseEndpoint, or the one the SDK resolves for its
// region. A client that does not show its options (a wrapper without an
// Options method) gives "unknown (a custom client)".
func DynamoDBEndpoint(ctx context.Context, client any) string {
	c, ok := client.(interface{ Options() dynamodb.Options })
	if !ok {
		return "unknown (a custom client)"
	}
	o := c.Options()
	if o.BaseEndpoint != nil {
		return *o.BaseEndpoint
	}
	if o.Region == "" {
		return "none (no endpoint and no region set)"
	}
	r := o.EndpointResolverV2
	if r == nil {
		r = dynamodb.NewDefaultEndpointResolverV2()
	}
	ep, err := r.ResolveEndpoint(ctx, dynamodb.EndpointParameters{Region: aws.String(o.Region)})
	if err != nil {
		return "none resolved for region " + strconv.Quote(o.Region)
	}
	return ep.URI.String()
}
