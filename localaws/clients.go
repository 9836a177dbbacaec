package localaws

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
)

// Retry settings of AWSConfig's retryer: the servers are local, so retries
// are quick and never rate limited.
const (
	retryMaxAttempts = 5
	retryBaseDelay   = 10 * time.Millisecond
	retryMaxBackoff  = 200 * time.Millisecond
)

// newTransport returns the HTTP transport shared by an Env's clients. It
// never uses a proxy, so traffic stays on loopback whatever HTTP_PROXY says.
func newTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.MaxIdleConnsPerHost = 64
	return t
}

// AWSConfig returns a configuration for the local servers: region us-east-1,
// static credentials, a standard retryer with 5 attempts, short back-off and
// no retry quota, and an HTTP client that ignores proxy settings. It sets no
// endpoint: use the Kinesis, KinesisMock and DynamoDB methods, or set
// BaseEndpoint yourself.
func (e *Env) AWSConfig() aws.Config {
	cfg := aws.Config{
		Region:      Region,
		Credentials: credentials.NewStaticCredentialsProvider("localaws", "localaws", ""),
		Retryer: func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = retryMaxAttempts
				o.BaseDelay = retryBaseDelay
				o.MaxBackoff = retryMaxBackoff
				o.RateLimiter = ratelimit.None
			})
		},
	}
	if e.transport != nil {
		cfg.HTTPClient = &http.Client{Transport: e.transport}
	}
	return cfg
}

// Kinesis returns a client of kinesalite. optFns apply after the endpoint is
// set, e.g. to install a fault-injecting HTTPClient. If Options.Kinesis was
// false, every call of the client fails.
func (e *Env) Kinesis(optFns ...func(*kinesis.Options)) *kinesis.Client {
	return e.kinesisClient(e.KinesisEndpoint, "Kinesis", optFns)
}

// KinesisMock returns a client of kinesis-mock. Its HTTP client, including
// one set by optFns, is wrapped so that SubscribeToShard works: kinesis-mock
// omits the initial-response message the SDK waits for first. If
// Options.KinesisMock was false, every call of the client fails.
func (e *Env) KinesisMock(optFns ...func(*kinesis.Options)) *kinesis.Client {
	fix := func(o *kinesis.Options) { o.HTTPClient = initialResponse{next: o.HTTPClient} }
	return e.kinesisClient(e.KinesisMockEndpoint, "KinesisMock", append(optFns[:len(optFns):len(optFns)], fix))
}

// kinesisClient returns a Kinesis client of endpoint, or one that fails if
// endpoint is empty.
func (e *Env) kinesisClient(endpoint, option string, optFns []func(*kinesis.Options)) *kinesis.Client {
	target := func(o *kinesis.Options) {
		o.BaseEndpoint, o.HTTPClient = clientTarget(endpoint, option, o.HTTPClient)
	}
	return kinesis.NewFromConfig(e.AWSConfig(), append([]func(*kinesis.Options){target}, optFns...)...)
}

// DynamoDB returns a client of dynalite. If Options.DynamoDB was false, every
// call of the client fails.
func (e *Env) DynamoDB(optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	target := func(o *dynamodb.Options) {
		o.BaseEndpoint, o.HTTPClient = clientTarget(e.DynamoDBEndpoint, "DynamoDB", o.HTTPClient)
	}
	return dynamodb.NewFromConfig(e.AWSConfig(), append([]func(*dynamodb.Options){target}, optFns...)...)
}

// clientTarget returns the base endpoint and HTTP client for a client of
// endpoint. An empty endpoint gets a client that fails every call: a nil
// BaseEndpoint would send the SDK to the real AWS.
func clientTarget(endpoint, option string, c aws.HTTPClient) (*string, aws.HTTPClient) {
	if endpoint == "" {
		return aws.String("http://127.0.0.1"), notStarted{option: option}
	}
	return aws.String(endpoint), c
}

// notStarted is the HTTP client of a server that was not asked for.
type notStarted struct{ option string }

// Do fails.
func (n notStarted) Do(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
	return nil, fmt.Errorf("localaws: %w: Options.%s was false", errNotStarted, n.option)
}

// errNotStarted is the error of every call of a client of a server that was not started.
var errNotStarted = errors.New("server not started")
