package iamcheck

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/google/go-cmp/cmp"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/internal/letters/letterstest"
	"github.com/weirstream/weir/internal/localaws"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/internal/recoverylog/logtest"
	"github.com/weirstream/weir/recovery/dynamolog"
	dldynamodb "github.com/weirstream/weir/sink/deadletter/dynamodb"
	"github.com/weirstream/weir/sink/dynamodb"
	kinesissink "github.com/weirstream/weir/sink/kinesis"
	"github.com/weirstream/weir/source"
	"github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/stream"
)

var servers = localaws.NewShared(localaws.Options{Kinesis: true, DynamoDB: true})

func TestMain(m *testing.M) { os.Exit(servers.Run(m)) }

// policyDir holds the policies, relative to this package.
const policyDir = "../../docs/iam"

// provisioningPolicy grants what creates the resources a run needs (the
// tables, the enhanced fan-out consumer) and deregisters the consumer: the
// runtime policies leave these out, so that a running worker cannot make or
// delete them unless given this policy too.
const provisioningPolicy = "provisioning.json"

// provisioningCalls are the actions provisioningPolicy must grant, each
// with the tests whose runs call it (and check that they do).
var provisioningCalls = map[string]string{
	"dynamodb:CreateTable":             "TestLeasesPolicy, TestRecoveryLogPolicy, TestShardStatePolicy",
	"kinesis:RegisterStreamConsumer":   "TestFanoutPolicy",
	"kinesis:DeregisterStreamConsumer": "TestFanoutPolicy (with DeregisterOnStop)",
}

// kmsConditions are the conditions every kms:Decrypt statement (and
// kms:GenerateDataKey, a writer's) must have,
// with the value each must hold: the key is usable only through Kinesis in
// the stream's region (kms:ViaService) and only for this stream (Kinesis
// passes the stream ARN as the encryption context aws:kinesis:arn; see
// "Permissions to use user-generated KMS keys" in the Kinesis Data Streams
// guide).
var kmsConditions = map[string]string{
	"kms:ViaService":                        "kinesis.REGION.amazonaws.com",
	"kms:EncryptionContext:aws:kinesis:arn": "arn:aws:kinesis:REGION:ACCOUNT:stream/STREAM",
}

// rarePaths are actions a policy must grant that a normal run does not
// call, each with the reason.
var rarePaths = map[string]string{
	"dynamodb:DeleteItem": "the lease code deletes the lease of a shard that ended once its children's leases have begun: only after a reshard (TestLeasesPolicyReshard waits for the call)",
	"dynamodb:GetItem":    "the recovery log reads an item back only when a put the SDK retried finds its seq taken; the lease coordinator reads one lease of each other worker per renewal period, so a single worker never does",
}

// recorder is an SDK HTTP client that records the IAM action of every
// request (from its X-Amz-Target header) before sending it on.
type recorder struct {
	next aws.HTTPClient

	mu      sync.Mutex
	actions map[string]bool
	waiters map[string]chan struct{} // by action, closed when it is first recorded
}

func newRecorder(next aws.HTTPClient) *recorder {
	if next == nil {
		next = &http.Client{Transport: &http.Transport{}}
	}
	return &recorder{next: next, actions: map[string]bool{}, waiters: map[string]chan struct{}{}}
}

// Do records req's action and sends it.
func (r *recorder) Do(req *http.Request) (*http.Response, error) {
	if a := action(req.Header.Get("X-Amz-Target")); a != "" {
		r.mu.Lock()
		if !r.actions[a] {
			r.actions[a] = true
			if ch := r.waiters[a]; ch != nil {
				close(ch)
			}
		}
		r.mu.Unlock()
	}
	return r.next.Do(req)
}

// seen returns a channel closed once action a is recorded (sent).
func (r *recorder) seen(a string) <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	ch := r.waiters[a]
	if ch == nil {
		ch = make(chan struct{})
		r.waiters[a] = ch
		if r.actions[a] {
			close(ch)
		}
	}
	return ch
}

// called returns the actions recorded, sorted.
func (r *recorder) called() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(func(yield func(string) bool) {
		for a := range r.actions {
			if !yield(a) {
				return
			}
		}
	})
}

// action maps an X-Amz-Target ("Kinesis_20131202.GetRecords") to its IAM
// action ("kinesis:GetRecords"): for these JSON protocols the action is
// named after the operation.
func action(target string) string {
	service, op, ok := strings.Cut(target, ".")
	if !ok {
		return ""
	}
	switch {
	case strings.HasPrefix(service, "Kinesis_"):
		return "kinesis:" + op
	case strings.HasPrefix(service, "DynamoDB_"):
		return "dynamodb:" + op
	}
	return "unknown:" + target
}

// policy is the part of an IAM policy document the test reads.
type policy struct {
	Version   string
	Statement []struct {
		Sid       string
		Effect    string
		Action    stringOrList
		Resource  stringOrList
		Condition map[string]map[string]stringOrList
	}
}

// stringOrList is a policy element that is a string or a list of them.
type stringOrList []string

func (s *stringOrList) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*s = []string{one}
		return nil
	}
	return json.Unmarshal(b, (*[]string)(s))
}

// readPolicy returns the actions the policy file name allows, by service
// prefix.
func readPolicy(t *testing.T, name string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(policyDir, name))
	if err != nil {
		t.Fatal(err)
	}
	var p policy
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if p.Version != "2012-10-17" || len(p.Statement) == 0 {
		t.Fatalf("%s: version %q with %d statements, want 2012-10-17 and some", name, p.Version, len(p.Statement))
	}
	allowed := map[string]bool{}
	for i, st := range p.Statement {
		if st.Effect != "Allow" || len(st.Resource) == 0 || slices.Contains(st.Resource, "*") {
			t.Errorf("%s: statement %d: effect %q on %v; want Allow on named resources", name, i, st.Effect, st.Resource)
		}
		for _, a := range st.Action {
			if strings.Contains(a, "*") {
				t.Errorf("%s: action %q: a least-privilege policy names each action", name, a)
			}
			if a == "kms:Decrypt" || a == "kms:GenerateDataKey" {
				for key, want := range kmsConditions {
					if got := st.Condition["StringEquals"][key]; len(got) != 1 || got[0] != want {
						t.Errorf("%s: statement %d (%s): %s with condition StringEquals %s = %v; want %q", name, i, st.Sid, a, key, got, want)
					}
				}
			}
			allowed[a] = true
		}
	}
	return allowed
}

// check compares the actions a run called with those of policy file: every
// one called must be allowed by file, or be one of provisioningCalls, and
// every one file allows for service (kinesis, dynamodb) must be called or
// be a rare path.
func check(t *testing.T, file, service string, called []string) {
	t.Helper()
	allowed := readPolicy(t, file)
	for _, a := range called {
		if strings.HasPrefix(a, service+":") && !allowed[a] && provisioningCalls[a] == "" {
			t.Errorf("weir called %s, which %s does not allow: add it to the policy (and to docs/iam.md)", a, file)
		}
	}
	for a := range allowed {
		if strings.HasPrefix(a, service+":") && !slices.Contains(called, a) && rarePaths[a] == "" {
			t.Errorf("%s allows %s, which weir never called: remove it (least privilege), or name its rare path in rarePaths", file, a)
		}
	}
	t.Logf("%s: called %v", file, called)
}

// provisioned checks that a run called the provisioning actions want, and
// no others.
func provisioned(t *testing.T, called []string, want ...string) {
	t.Helper()
	var got []string
	for _, a := range called {
		if provisioningCalls[a] != "" {
			got = append(got, a)
		}
	}
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("provisioning actions called (-want +got):\n%s", diff)
	}
}

// runReceiver reads n records of a new stream with cfg (stream, endpoint
// and recording client set here), has their blocks completed, recomputes
// one block, and stops the receiver gracefully.
func runReceiver(t *testing.T, env *localaws.Env, rec *recorder, edit func(*kinesis.Config)) {
	t.Helper()
	ctx := t.Context()
	stream := localaws.UniqueName(t)
	if err := env.CreateStream(ctx, stream, 2); err != nil {
		t.Fatal(err)
	}
	const n = 100
	data := make([][]byte, n)
	for i := range data {
		data[i] = fmt.Appendf(nil, "r-%03d", i)
	}
	if err := env.PutRecords(ctx, stream, data, nil); err != nil {
		t.Fatal(err)
	}
	awsCfg := env.AWSConfig()
	awsCfg.HTTPClient = rec
	cfg := kinesis.Config{
		Stream: stream, App: "iam", InitialPosition: kinesis.TrimHorizon, AWS: &awsCfg, Endpoint: env.KinesisEndpoint,
		PollInterval: 10 * time.Millisecond, ShardSyncInterval: 50 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler),
	}
	if edit != nil {
		edit(&cfg)
	}
	readAndStop(t, cfg, n)
}

// readAndStop runs a receiver of cfg until it has read n records, has
// their blocks completed, recomputes one block, and stops it gracefully.
func readAndStop(t *testing.T, cfg kinesis.Config, n int) {
	t.Helper()
	ctx := t.Context()
	rc := receive(t, cfg, false)
	rc.waitFor(t, n)
	rc.mu.Lock()
	done := slices.Clone(rc.blocks)
	hook := rc.hook
	rc.mu.Unlock()
	hook.BlocksCompleted(ctx, done)
	if _, err := rc.r.Recompute(ctx, done[0]); err != nil {
		t.Fatalf("Recompute: %v", err)
	}
	rc.stop(t)
}

// receiving is a receiver started by receive, with the blocks it pushed.
type receiving struct {
	r      *kinesis.Receiver
	errc   chan error           // Start's result
	pushed chan struct{}        // a token after each push, dropped when one waits
	done   chan batch.BlockInfo // with completeEach, the blocks to complete, in order

	mu     sync.Mutex
	blocks []batch.BlockInfo
	total  int
	hook   source.CompletionObserver // the receiver's, registered in Start before its first push
}

// receive starts a receiver of cfg. With completeEach, every block it
// pushes is completed at once (by one goroutine, in order, as a driver
// reports them), so its checkpoints follow its reads.
func receive(t *testing.T, cfg kinesis.Config, completeEach bool) *receiving {
	t.Helper()
	r, err := kinesis.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rc := &receiving{r: r, errc: make(chan error, 1), pushed: make(chan struct{}, 1), done: make(chan batch.BlockInfo, 64)}
	observe := func(h any) {
		rc.mu.Lock()
		rc.hook, _ = h.(source.CompletionObserver)
		rc.mu.Unlock()
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	push := func(pctx context.Context, b source.Block[kinesis.Record]) (batch.BlockInfo, error) {
		rc.mu.Lock()
		info := batch.BlockInfo{ID: batch.BlockID{Seq: uint64(len(rc.blocks))}, Ranges: b.Ranges, Count: len(b.Records)}
		rc.blocks = append(rc.blocks, info)
		rc.total += len(b.Records)
		rc.mu.Unlock()
		select {
		case rc.pushed <- struct{}{}:
		default:
		}
		if completeEach {
			select {
			case rc.done <- info:
			case <-pctx.Done():
				return batch.BlockInfo{}, pctx.Err()
			case <-ctx.Done():
				return batch.BlockInfo{}, ctx.Err()
			}
		}
		return info, nil
	}
	if completeEach {
		wg.Go(func() {
			for {
				select {
				case info := <-rc.done:
					rc.mu.Lock()
					hook := rc.hook
					rc.mu.Unlock()
					hook.BlocksCompleted(ctx, []batch.BlockInfo{info})
				case <-ctx.Done():
					return
				}
			}
		})
	}
	go func() {
		rc.errc <- r.Start(context.Background(), source.Runtime[kinesis.Record]{Push: push, Observe: observe, BlockInterval: 5 * time.Millisecond, BatchInterval: 50 * time.Millisecond})
	}()
	return rc
}

// waitFor waits until rc's receiver has pushed n records, failing t if
// Start returns first or a minute passes.
func (rc *receiving) waitFor(t *testing.T, n int) {
	t.Helper()
	rc.until(t, fmt.Sprintf("%d records pushed", n), func() <-chan struct{} {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if rc.total >= n {
			return closed
		}
		return rc.pushed
	})
}

// closed is a closed channel.
var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// until waits until the channel next returns is closed (next is called
// again whenever it yields a token), failing t with what it waited for if
// Start returns first or a minute passes.
func (rc *receiving) until(t *testing.T, what string, next func() <-chan struct{}) {
	t.Helper()
	guard := time.NewTimer(time.Minute)
	defer guard.Stop()
	for {
		ch := next()
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case err := <-rc.errc:
			t.Fatalf("Start returned before %s: %v", what, err)
		case <-guard.C:
			t.Fatalf("no %s within a minute", what)
		}
	}
}

// stop stops rc's receiver gracefully.
func (rc *receiving) stop(t *testing.T) {
	t.Helper()
	stopCtx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := rc.r.Stop(stopCtx); err != nil {
		t.Fatal(err)
	}
	if err := <-rc.errc; err != nil {
		t.Fatalf("Start: %v", err)
	}
}

func TestPollingPolicy(t *testing.T) {
	t.Parallel()
	env := servers.Env(t)
	rec := newRecorder(env.AWSConfig().HTTPClient)
	runReceiver(t, env, rec, nil)
	check(t, "kinesis-polling.json", "kinesis", rec.called())
}

func TestLeasesPolicy(t *testing.T) {
	t.Parallel()
	env := servers.Env(t)
	rec := newRecorder(env.AWSConfig().HTTPClient)
	runReceiver(t, env, rec, func(c *kinesis.Config) {
		c.Leases = &leasetable.Config{
			TableName: localaws.UniqueName(t), Endpoint: env.DynamoDBEndpoint, LeaseDuration: 3 * time.Second, CheckpointInterval: 20 * time.Millisecond}
	})
	called := rec.called()
	check(t, "kinesis-polling.json", "kinesis", called)
	check(t, "dynamodb-leases.json", "dynamodb", called)
	provisioned(t, called, "dynamodb:CreateTable")
}

// TestLeasesPolicyReshard splits the shard of a stream read with leases:
// the parent is read to its end and checkpointed at SHARD_END, its
// children are taken and checkpointed past their start, and the lease code
// then deletes the parent's lease (internal/lease, deleteFinished), a call
// TestLeasesPolicy's run, which never reshards, does not make.
func TestLeasesPolicyReshard(t *testing.T) {
	t.Parallel()
	env := servers.Env(t)
	ctx := t.Context()
	rec := newRecorder(env.AWSConfig().HTTPClient)
	setup := env.Kinesis() // not recorded: the stream and its reshard are the test's, not weir's
	stream, table := localaws.UniqueName(t), localaws.UniqueName(t)
	if err := env.CreateStream(ctx, stream, 1); err != nil {
		t.Fatal(err)
	}
	const n = 100
	put := func(prefix string) {
		t.Helper()
		data := make([][]byte, n)
		for i := range data {
			data[i] = fmt.Appendf(nil, "%s-%03d", prefix, i)
		}
		if err := env.PutRecords(ctx, stream, data, strconv.Itoa); err != nil { // keys spread over both children
			t.Fatal(err)
		}
	}
	put("parent")
	awsCfg := env.AWSConfig()
	awsCfg.HTTPClient = rec
	rc := receive(t, kinesis.Config{
		Stream: stream, App: "iam", InitialPosition: kinesis.TrimHorizon, AWS: &awsCfg, Endpoint: env.KinesisEndpoint,
		PollInterval: 10 * time.Millisecond, ShardSyncInterval: 50 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler),
		Leases: &leasetable.Config{
			TableName: table, Endpoint: env.DynamoDBEndpoint, LeaseDuration: 3 * time.Second,
			TakeInterval: 50 * time.Millisecond, CheckpointInterval: 20 * time.Millisecond,
		},
	}, true)
	rc.waitFor(t, n)
	parent := split(t, setup, stream)
	put("child")
	rc.until(t, "DeleteItem of the parent's lease", func() <-chan struct{} { return rec.seen("dynamodb:DeleteItem") })
	rc.stop(t)

	// The delete was sent; once the receiver stopped, it was answered.
	out, err := env.DynamoDB().GetItem(ctx, &awsdynamodb.GetItemInput{
		TableName: &table, Key: map[string]types.AttributeValue{"leaseKey": &types.AttributeValueMemberS{Value: parent}}, ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	if out.Item != nil {
		t.Errorf("the lease of %s, which ended and whose children were taken, is still in the table", parent)
	}
	called := rec.called()
	check(t, "kinesis-polling.json", "kinesis", called)
	check(t, "dynamodb-leases.json", "dynamodb", called)
	provisioned(t, called, "dynamodb:CreateTable")
}

// split splits the only shard of stream in the middle of its hash key
// range, waits until the stream is ACTIVE again, and returns the shard
// split.
func split(t *testing.T, c *awskinesis.Client, stream string) string {
	t.Helper()
	ctx := t.Context()
	out, err := c.ListShards(ctx, &awskinesis.ListShardsInput{StreamName: &stream})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Shards) != 1 {
		t.Fatalf("%s has %d shards, want 1", stream, len(out.Shards))
	}
	parent := out.Shards[0]
	lo, _ := new(big.Int).SetString(aws.ToString(parent.HashKeyRange.StartingHashKey), 10)
	hi, _ := new(big.Int).SetString(aws.ToString(parent.HashKeyRange.EndingHashKey), 10)
	mid := new(big.Int).Rsh(new(big.Int).Add(lo, hi), 1)
	if _, err := c.SplitShard(ctx, &awskinesis.SplitShardInput{
		StreamName: &stream, ShardToSplit: parent.ShardId, NewStartingHashKey: aws.String(mid.String()),
	}); err != nil {
		t.Fatal(err)
	}
	for {
		// A server-side state change has nothing to wait on: ask again
		// (each call is a round trip; the test's context bounds the loop).
		d, err := c.DescribeStreamSummary(ctx, &awskinesis.DescribeStreamSummaryInput{StreamName: &stream})
		if err != nil {
			t.Fatal(err)
		}
		if d.StreamDescriptionSummary.StreamStatus == kintypes.StreamStatusActive {
			return aws.ToString(parent.ShardId)
		}
	}
}

func TestRecoveryLogPolicy(t *testing.T) {
	t.Parallel()
	env := servers.Env(t)
	rec := newRecorder(env.AWSConfig().HTTPClient)
	awsCfg := env.AWSConfig()
	awsCfg.HTTPClient = rec
	cfg := dynamolog.Config{AWS: &awsCfg, Endpoint: env.DynamoDBEndpoint, Table: localaws.UniqueName(t), Name: "iam/worker-1"}
	ctx := t.Context()
	l, err := recoverylog.Open(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		logtest.MustAppend(t, l, logtest.Block(0, uint64(i)))
	}
	if err := l.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Read(ctx); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l, err = recoverylog.Open(ctx, cfg, nil) // a restart reads it back
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	check(t, "dynamodb-log.json", "dynamodb", rec.called())
	provisioned(t, rec.called(), "dynamodb:CreateTable")
}

// TestDynamoDBSinkPolicy writes a batch of puts and updates with the DynamoDB sink,
// then the same batch again (every write then skipped), and checks the
// calls against dynamodb-sink.json. The table is the test's: the sink
// never creates one.
func TestDynamoDBSinkPolicy(t *testing.T) {
	t.Parallel()
	env := servers.Env(t)
	ctx := t.Context()
	table := localaws.UniqueName(t)
	if _, err := env.DynamoDB().CreateTable(ctx, &awsdynamodb.CreateTableInput{
		TableName:            aws.String(table),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	}); err != nil {
		t.Fatal(err)
	}
	awsCfg := env.AWSConfig()
	rec := newRecorder(awsCfg.HTTPClient)
	awsCfg.HTTPClient = rec
	s, err := dynamodb.New(ctx, dynamodb.Config{AWS: &awsCfg, Endpoint: env.DynamoDBEndpoint, Table: table}, func(i int) (dynamodb.Write, error) {
		id := &types.AttributeValueMemberS{Value: fmt.Sprint("item-", i%3)}
		if i%2 == 0 {
			return dynamodb.Write{Item: map[string]types.AttributeValue{"id": id}}, nil
		}
		return dynamodb.Write{Key: map[string]types.AttributeValue{"id": id}, Update: "ADD hits :one",
			Values: map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	b := batch.New(1_700_000_000_000, nil, []int{0, 1, 2, 3, 4, 5})
	for range 2 {
		if err := s.Write(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	check(t, "dynamodb-sink.json", "dynamodb", rec.called())
	provisioned(t, rec.called())
}

// TestDynamoDBDeadLettersPolicy quarantines letters into a DynamoDB
// dead-letter table, twice (a recomputed batch), lists them, and checks
// the calls against dynamodb-deadletters.json.
func TestDynamoDBDeadLettersPolicy(t *testing.T) {
	t.Parallel()
	env := servers.Env(t)
	ctx := t.Context()
	table := letterstest.CreateTable(t, env.DynamoDB())
	awsCfg := env.AWSConfig()
	rec := newRecorder(awsCfg.HTTPClient)
	awsCfg.HTTPClient = rec
	dead, err := dldynamodb.New(ctx, dynamodb.Config{AWS: &awsCfg, Endpoint: env.DynamoDBEndpoint, Table: table})
	if err != nil {
		t.Fatal(err)
	}
	letters := []stream.DeadLetter{{Time: 1_700_000_000_000, Record: []byte("a"), Encoding: "raw", Err: "boom"}}
	for range 2 {
		if err := dead.Quarantine(ctx, letters); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := dead.Letters(ctx); err != nil || len(got) != 1 {
		t.Fatalf("Letters = %d letters, %v; want 1", len(got), err)
	}
	check(t, "dynamodb-deadletters.json", "dynamodb", rec.called())
	provisioned(t, rec.called())
}

// TestFanoutPolicy reads a stream of kinesis-mock (kinesalite has no
// enhanced fan-out) with Config.FanOut, deregistering the consumer at the
// end, and checks the calls against kinesis-fanout.json.
func TestFanoutPolicy(t *testing.T) {
	t.Parallel()
	env := localaws.ForTest(t, localaws.Options{KinesisMock: true})
	var rec *recorder
	client := env.KinesisMock(func(o *awskinesis.Options) { rec = newRecorder(o.HTTPClient); o.HTTPClient = rec })
	setup := env.KinesisMock() // not recorded: the stream is the test's, not weir's
	ctx := t.Context()
	stream := localaws.UniqueName(t)
	if err := localaws.CreateStreamOn(ctx, setup, stream, 2); err != nil {
		t.Fatal(err)
	}
	const n = 50
	data := make([][]byte, n)
	for i := range data {
		data[i] = fmt.Appendf(nil, "r-%03d", i)
	}
	if err := localaws.PutRecordsOn(ctx, setup, stream, data, nil); err != nil {
		t.Fatal(err)
	}
	readAndStop(t, kinesis.Config{
		Stream: stream, App: "iam", InitialPosition: kinesis.TrimHorizon, Client: client,
		PollInterval: 10 * time.Millisecond, ShardSyncInterval: 50 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler),
		FanOut: &kinesis.FanOutConfig{ConsumerName: "iam-" + stream[len(stream)-8:], DeregisterOnStop: true},
	}, n)
	check(t, "kinesis-fanout.json", "kinesis", rec.called())
	provisioned(t, rec.called(), "kinesis:RegisterStreamConsumer", "kinesis:DeregisterStreamConsumer")
}

// TestFanoutPolicyCoversPolling checks the enhanced fan-out policy parses
// and allows what polling needs too: ranges are replayed with GetRecords
// whichever way shards are read.
func TestFanoutPolicyCoversPolling(t *testing.T) {
	fanout := readPolicy(t, "kinesis-fanout.json")
	for a := range readPolicy(t, "kinesis-polling.json") {
		if !fanout[a] {
			t.Errorf("kinesis-fanout.json does not allow %s, which kinesis-polling.json does", a)
		}
	}
}

// TestProvisioningPolicy checks that provisioning.json grants exactly the
// provisioning actions, that no runtime policy grants any of them, and
// (through readPolicy) that every kms:Decrypt carries kmsConditions.
func TestProvisioningPolicy(t *testing.T) {
	t.Parallel()
	got := slices.Sorted(maps.Keys(readPolicy(t, provisioningPolicy)))
	want := slices.Sorted(maps.Keys(provisioningCalls))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s: actions (-want +got):\n%s", provisioningPolicy, diff)
	}
	files, err := filepath.Glob(filepath.Join(policyDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range files {
		name := filepath.Base(path)
		if name == provisioningPolicy {
			continue
		}
		for a := range readPolicy(t, name) {
			if provisioningCalls[a] != "" {
				t.Errorf("%s grants %s: move it to %s, which only whoever creates the resources needs", name, a, provisioningPolicy)
			}
		}
	}
}

// TestKinesisSinkPolicy writes a batch with the Kinesis sink.
func TestKinesisSinkPolicy(t *testing.T) {
	t.Parallel()
	env := servers.Env(t)
	rec := newRecorder(env.AWSConfig().HTTPClient)
	stream := localaws.UniqueName(t)
	if err := env.CreateStream(t.Context(), stream, 2); err != nil {
		t.Fatal(err)
	}
	sink, err := kinesissink.New(kinesissink.Config[string]{
		Client: env.Kinesis(func(o *awskinesis.Options) { o.HTTPClient = rec }),
		Stream: stream, Origin: "iam", Record: func(s string) (string, []byte) { return s, []byte(s) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := sink.Write(t.Context(), batch.New(1000, nil, []string{"a", "b", "c"})); err != nil {
		t.Fatal(err)
	}
	check(t, "kinesis-sink.json", "kinesis", rec.called())
}
