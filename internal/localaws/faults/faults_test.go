package faults_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"
	"github.com/google/go-cmp/cmp"
	"github.com/weirstream/weir/internal/localaws"
	"github.com/weirstream/weir/internal/localaws/faults"
)

// TestSDKDecodesInjectedErrors checks, against kinesalite and dynalite, that
// the SDK turns each injected fault into the error a real one would give.
func TestSDKDecodesInjectedErrors(t *testing.T) {
	t.Parallel()
	env := localaws.ForTest(t, localaws.Options{Kinesis: true, DynamoDB: true})
	ctx := t.Context()
	stream := localaws.UniqueName(t)
	if err := env.CreateStream(ctx, stream, 1); err != nil {
		t.Fatal(err)
	}
	table := createTable(t, env.DynamoDB())
	it, err := env.Kinesis().GetShardIterator(ctx, &kinesis.GetShardIteratorInput{
		StreamName: aws.String(stream), ShardId: aws.String("shardId-000000000000"),
		ShardIteratorType: ktypes.ShardIteratorTypeTrimHorizon,
	})
	if err != nil {
		t.Fatal(err)
	}
	getRecords := func(kc *kinesis.Client) error {
		_, err := kc.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator})
		return err
	}
	putRecord := func(kc *kinesis.Client) error {
		_, err := kc.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(stream),
			Records: []ktypes.PutRecordsRequestEntry{{Data: []byte("x"), PartitionKey: aws.String("k")}}})
		return err
	}
	listShards := func(kc *kinesis.Client) error {
		_, err := kc.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(stream)})
		return err
	}
	tests := []struct {
		op    string
		kind  faults.Kind
		call  func(*kinesis.Client) error
		check func(error) bool
	}{
		{"GetRecords", faults.Throughput, getRecords, isA[*ktypes.ProvisionedThroughputExceededException]},
		{"PutRecords", faults.Throughput, putRecord, isA[*ktypes.ProvisionedThroughputExceededException]},
		{"ListShards", faults.LimitExceeded, listShards, isA[*ktypes.LimitExceededException]},
		{"GetRecords", faults.ExpiredIterator, getRecords, isA[*ktypes.ExpiredIteratorException]},
		{"GetRecords", faults.InternalFailure, getRecords, hasStatus(500, "InternalFailure")},
		{"GetRecords", faults.ServiceUnavailable, getRecords, hasStatus(503, "ServiceUnavailable")},
		{"GetRecords", faults.DropRequest, getRecords, isRetryableConnectionError},
		{"PutRecords", faults.DropResponse, putRecord, isA[*smithy.DeserializationError]},
		{"GetRecords", faults.RequestTimeout, getRecords, hasStatus(408, "UnknownError")},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%v", tt.op, tt.kind), func(t *testing.T) {
			tr := newTransport(t, faults.Rule{Operation: tt.op, Kind: tt.kind})
			kc := env.Kinesis(func(o *kinesis.Options) { o.HTTPClient = tr; o.Retryer = aws.NopRetryer{} })
			if err := tt.call(kc); !tt.check(err) {
				t.Errorf("%s with %v injected: unexpected error %#v (%v)", tt.op, tt.kind, err, err)
			}
			if got := tr.Injected(tt.op, tt.kind); got != 1 {
				t.Errorf("Injected(%q, %v) = %d, want 1", tt.op, tt.kind, got)
			}
		})
	}

	t.Run("GetRecords/Hang until the caller gives up", func(t *testing.T) {
		tr := newTransport(t, faults.Rule{Operation: "GetRecords", Kind: faults.Hang})
		kc := env.Kinesis(func(o *kinesis.Options) { o.HTTPClient = tr; o.Retryer = aws.NopRetryer{} })
		hung, cancel := context.WithCancel(ctx)
		defer cancel()
		errc := make(chan error, 1)
		go func() {
			_, err := kc.GetRecords(hung, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator})
			errc <- err
		}()
		if err := tr.WaitInjected(ctx, "GetRecords", faults.Hang, 1); err != nil {
			t.Fatal(err)
		}
		cancel() // the caller gives up once the call is held
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Errorf("GetRecords held by Hang until cancelled: got %v, want context.Canceled", err)
		}
	})

	t.Run("GetRecords/RequestTimeout after a delay", func(t *testing.T) {
		tr := newTransport(t, faults.Rule{Operation: "GetRecords", Kind: faults.RequestTimeout, Delay: 50 * time.Millisecond})
		kc := env.Kinesis(func(o *kinesis.Options) { o.HTTPClient = tr; o.Retryer = aws.NopRetryer{} })
		if err := getRecords(kc); !hasStatus(408, "UnknownError")(err) {
			t.Errorf("GetRecords: got %#v, want a 408", err)
		}
	})

	t.Run("DropResponse reaches the server", func(t *testing.T) {
		got := countRecords(t, env.Kinesis(), it.ShardIterator)
		// The Throughput put never reached the server; the DropResponse one did.
		if got != 1 {
			t.Errorf("records on the stream = %d, want 1: the put whose response was cut", got)
		}
	})

	t.Run("DynamoDB PutItem/Throughput", func(t *testing.T) {
		tr := newTransport(t, faults.Rule{Operation: "PutItem", Kind: faults.Throughput})
		dc := env.DynamoDB(func(o *dynamodb.Options) { o.HTTPClient = tr; o.Retryer = aws.NopRetryer{} })
		_, err := dc.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table),
			Item: map[string]dtypes.AttributeValue{"k": &dtypes.AttributeValueMemberS{Value: "v"}}})
		if !isA[*dtypes.ProvisionedThroughputExceededException](err) {
			t.Errorf("PutItem: got %v, want *types.ProvisionedThroughputExceededException", err)
		}
	})
}

// TestSDKRetriesInjectedThrottling checks that the SDK's own retries get past
// a limited number of injected faults, and that the transport counts them.
func TestSDKRetriesInjectedThrottling(t *testing.T) {
	t.Parallel()
	env := localaws.ForTest(t, localaws.Options{Kinesis: true})
	stream := localaws.UniqueName(t)
	if err := env.CreateStream(t.Context(), stream, 1); err != nil {
		t.Fatal(err)
	}
	tr := newTransport(t, faults.Rule{Operation: "ListShards", Kind: faults.Throughput, Times: 2})
	kc := env.Kinesis(func(o *kinesis.Options) { o.HTTPClient = tr })
	if _, err := kc.ListShards(t.Context(), &kinesis.ListShardsInput{StreamName: aws.String(stream)}); err != nil {
		t.Fatalf("ListShards with 2 injected throttles and 5 attempts: %v", err)
	}
	got := []int{tr.Injected("ListShards", faults.Throughput), tr.Requests("ListShards")}
	if diff := cmp.Diff([]int{2, 3}, got); diff != "" {
		t.Errorf("[injected, requests] (-want +got):\n%s", diff)
	}
}

// createTable creates a table keyed by the string "k".
func createTable(t *testing.T, dc *dynamodb.Client) string {
	t.Helper()
	name := localaws.UniqueName(t)
	_, err := dc.CreateTable(t.Context(), &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		BillingMode:          dtypes.BillingModePayPerRequest,
		AttributeDefinitions: []dtypes.AttributeDefinition{{AttributeName: aws.String("k"), AttributeType: dtypes.ScalarAttributeTypeS}},
		KeySchema:            []dtypes.KeySchemaElement{{AttributeName: aws.String("k"), KeyType: dtypes.KeyTypeHash}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// countRecords returns how many records one GetRecords call from it returns.
func countRecords(t *testing.T, kc *kinesis.Client, it *string) int {
	t.Helper()
	out, err := kc.GetRecords(t.Context(), &kinesis.GetRecordsInput{ShardIterator: it})
	if err != nil {
		t.Fatal(err)
	}
	return len(out.Records)
}

// newTransport returns a Transport with rules, seed 1.
func newTransport(t *testing.T, rules ...faults.Rule) *faults.Transport {
	t.Helper()
	tr, err := faults.New(faults.Config{Seed: 1, Rules: rules})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// isA reports whether err is or wraps a T.
func isA[T error](err error) bool {
	var target T
	return errors.As(err, &target)
}

// hasStatus returns a check for an API error with this HTTP status and code.
func hasStatus(status int, code string) func(error) bool {
	return func(err error) bool {
		var re *awshttp.ResponseError
		var ae smithy.APIError
		return errors.As(err, &re) && re.HTTPStatusCode() == status && errors.As(err, &ae) && ae.ErrorCode() == code
	}
}

// isRetryableConnectionError reports whether the SDK's standard retryer would
// retry err as a broken connection.
func isRetryableConnectionError(err error) bool {
	return err != nil && strings.Contains(err.Error(), "connection reset") &&
		retry.RetryableConnectionError{}.IsErrorRetryable(err) == aws.TrueTernary
}

// TestRules checks rule matching, Skip, Times and the order of rules with
// plain HTTP requests to a local server.
func TestRules(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(srv.Close)
	tests := []struct {
		name  string
		rules []faults.Rule
		ops   []string
		want  []string // status or "drop" per request
	}{
		{
			name:  "operation filter, bare and full",
			rules: []faults.Rule{{Operation: "GetRecords", Kind: faults.Throughput}, {Operation: "Kinesis_20131202.ListShards", Kind: faults.ServiceUnavailable}},
			ops:   []string{"GetRecords", "PutRecords", "ListShards", "GetRecords"},
			want:  []string{"400", "200", "503", "400"},
		},
		{
			name:  "skip then times",
			rules: []faults.Rule{{Kind: faults.InternalFailure, Skip: 2, Times: 2}},
			ops:   []string{"A", "A", "A", "A", "A"},
			want:  []string{"200", "200", "500", "500", "200"},
		},
		{
			name:  "first rule that fires wins",
			rules: []faults.Rule{{Kind: faults.DropRequest, Times: 1}, {Kind: faults.LimitExceeded, Times: 1}},
			ops:   []string{"A", "A", "A"},
			want:  []string{"drop", "400", "200"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tr := newTransport(t, tt.rules...)
			var got []string
			for _, op := range tt.ops {
				got = append(got, send(t, tr, srv.URL, "Kinesis_20131202."+op))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("outcomes (-want +got):\n%s", diff)
			}
			if got, want := tr.Requests(""), len(tt.ops); got != want {
				t.Errorf("Requests(\"\") = %d, want %d", got, want)
			}
		})
	}
}

// TestProbabilityIsSeeded checks that a seed fixes which requests fail.
func TestProbabilityIsSeeded(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(srv.Close)
	run := func(seed uint64) []string {
		tr, err := faults.New(faults.Config{Seed: seed, Rules: []faults.Rule{{Kind: faults.Throughput, Probability: 0.3}}})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for range 200 {
			out = append(out, send(t, tr, srv.URL, "Kinesis_20131202.GetRecords"))
		}
		if n := tr.Injected("GetRecords", faults.Throughput); n < 30 || n > 90 {
			t.Errorf("seed %d: injected %d of 200 at probability 0.3", seed, n)
		}
		return out
	}
	if diff := cmp.Diff(run(7), run(7)); diff != "" {
		t.Errorf("two runs with seed 7 differ (-first +second):\n%s", diff)
	}
	if cmp.Equal(run(7), run(8)) {
		t.Errorf("seeds 7 and 8 gave the same outcomes")
	}
}

// send posts one request with target and returns its status, or "drop".
func send(t *testing.T, tr *faults.Transport, url, target string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Amz-Target", target)
	resp, err := tr.Do(req)
	if err != nil {
		return "drop"
	}
	_ = resp.Body.Close()
	return fmt.Sprint(resp.StatusCode)
}

// TestNewRejectsBadRules checks that every problem is reported at once.
func TestNewRejectsBadRules(t *testing.T) {
	t.Parallel()
	_, err := faults.New(faults.Config{Rules: []faults.Rule{
		{Kind: faults.Throughput},
		{Kind: 0, Probability: 1.5, Skip: -1, Times: -2},
	}})
	if !errors.Is(err, faults.ErrInvalidConfig) {
		t.Fatalf("New: got %v, want ErrInvalidConfig", err)
	}
	for _, s := range []string{"Rules[1].Kind", "Rules[1].Probability", "Rules[1].Skip", "Rules[1].Times"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %s", err, s)
		}
	}
	if strings.Contains(err.Error(), "Rules[0]") {
		t.Errorf("error %q blames the valid Rules[0]", err)
	}
}
