package repartition

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/internal/hashkey"
	"github.com/weirstream/weir/internal/kpl"
	"github.com/weirstream/weir/internal/localaws"
	"github.com/weirstream/weir/internal/origin"
	sink "github.com/weirstream/weir/sink/kinesis"
	source "github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/stream"
)

var servers = localaws.NewShared(localaws.Options{Kinesis: true, DynamoDB: true})

func TestMain(m *testing.M) { os.Exit(servers.Run(m)) }

// keyOf is the key of input record i: 37 keys, each spread over every
// shard of the input (the partition key is i).
func keyOf(i int) string { return "user-" + strconv.Itoa(i*7%37) }

// putInput creates a stream of shards shards holding n records, record i's
// data keyOf(i) and its partition key i.
func putInput(t testing.TB, env *localaws.Env, shards, n int) string {
	t.Helper()
	name := localaws.UniqueName(t)
	if err := env.CreateStream(t.Context(), name, shards); err != nil {
		t.Fatal(err)
	}
	data := make([][]byte, n)
	for i := range data {
		data[i] = []byte(keyOf(i))
	}
	if err := env.PutRecords(t.Context(), name, data, strconv.Itoa); err != nil {
		t.Fatal(err)
	}
	return name
}

// inputCounts returns the count of each key of the first n records of an
// input (putInput's), leaving out the keys skip reports true for (nil:
// none).
func inputCounts(n int, skip func(string) bool) map[string]int64 {
	want := map[string]int64{}
	for i := range n {
		if k := keyOf(i); skip == nil || !skip(k) {
			want[k]++
		}
	}
	return want
}

// checkCounts fails t unless got holds every key of want with its count.
func checkCounts(t *testing.T, want, got map[string]int64) {
	t.Helper()
	for k, w := range want {
		if got[k] != w {
			t.Errorf("key %q: count %d, want %d", k, got[k], w)
		}
	}
}

// testContext returns t's context, ended after 2 minutes.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// readPairs returns a pipeline of 200 ms batches reading the stream in,
// from its trim horizon, with leases if not nil, and the stream of its
// records as pairs (the record's data, 1).
func readPairs(t testing.TB, env *localaws.Env, in string, leases *leasetable.Config) (*stream.Pipeline, *stream.Stream[stream.Pair[string, int64]]) {
	t.Helper()
	return readPairsLogged(t, env, in, leases, nil)
}

// readPairsLogged is readPairs with the pipeline's logger (nil: the
// default).
func readPairsLogged(t testing.TB, env *localaws.Env, in string, leases *leasetable.Config, logger *slog.Logger) (*stream.Pipeline, *stream.Stream[stream.Pair[string, int64]]) {
	t.Helper()
	awsCfg := env.AWSConfig()
	recv, err := source.New(source.Config{Stream: in, App: localaws.UniqueName(t), InitialPosition: source.TrimHorizon,
		AWS: &awsCfg, Endpoint: env.KinesisEndpoint, PollInterval: 50 * time.Millisecond, Leases: leases})
	if err != nil {
		t.Fatal(err)
	}
	p, err := stream.NewPipeline(stream.Config{BatchInterval: 200 * time.Millisecond, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	return p, stream.Map(stream.From(p, recv), func(r source.Record) stream.Pair[string, int64] {
		return stream.Pair[string, int64]{Key: string(r.Data), Value: 1}
	})
}

// byKey is ByKey on pairs with cfg, its AWS and Endpoint set to env's.
func byKey(ctx context.Context, t testing.TB, env *localaws.Env, pairs *stream.Stream[stream.Pair[string, int64]], cfg Config[string, int64]) *stream.Stream[stream.Pair[string, int64]] {
	t.Helper()
	awsCfg := env.AWSConfig()
	cfg.AWS, cfg.Endpoint = &awsCfg, env.KinesisEndpoint
	shuffled, err := ByKey(ctx, pairs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return shuffled
}

// countByKey is the running count of each key of pairs.
func countByKey(pairs *stream.Stream[stream.Pair[string, int64]]) *stream.Stream[stream.Pair[string, int64]] {
	return stream.UpdateStateByKey(pairs, func(_ string, vs []int64, s int64, _ bool) (int64, bool) {
		for _, v := range vs {
			s += v
		}
		return s, true
	})
}

// TestByKeyCountsEveryKey counts the records of each key of a 4-shard
// stream, whose keys are spread over every shard, with UpdateStateByKey
// after ByKey: the counts equal the truth, the intermediate stream was
// created with the shards asked for, and each key's records are all in one
// of its shards.
func TestByKeyCountsEveryKey(t *testing.T) {
	env := servers.Env(t)
	ctx := testContext(t)
	const n = 3000
	in := putInput(t, env, 4, n)
	want := inputCounts(n, nil)
	mid := localaws.UniqueName(t)
	got := runCount(ctx, t, env, in, n, &Config[string, int64]{Stream: mid, Shards: 3})
	checkCounts(t, want, got)
	if len(got) != len(want) {
		t.Errorf("%d keys counted, want %d", len(got), len(want))
	}

	shardOf := map[string]string{}
	seen := 0
	for shard, recs := range readShards(t, env.Kinesis(), mid) {
		for _, d := range recs {
			_, payload, ok, err := origin.Decode(d)
			if !ok || err != nil {
				t.Fatalf("shard %s: record not tagged: %v", shard, err)
			}
			pr, err := (codec[string, int64]{stream.JSONCodec[string](), stream.JSONCodec[int64]()}).decode(payload)
			if err != nil {
				t.Fatal(err)
			}
			seen++
			if s, ok := shardOf[pr.Key]; ok && s != shard {
				t.Errorf("key %q in shards %s and %s", pr.Key, s, shard)
			}
			shardOf[pr.Key] = shard
		}
	}
	if seen != n {
		t.Errorf("%d records in the intermediate stream, want %d", seen, n)
	}
}

// runCount counts the records of each key of the stream in, n records,
// through ByKey configured by cfg (AWS and Endpoint set to env's), with
// UpdateStateByKey after it, until the counts add up to at least n; it
// returns the counts of that batch. A nil cfg counts without ByKey.
func runCount(ctx context.Context, t testing.TB, env *localaws.Env, in string, n int, cfg *Config[string, int64]) map[string]int64 {
	t.Helper()
	var leases *leasetable.Config
	if cfg != nil {
		leases = cfg.Leases // the source's and ByKey's: the same Config
	}
	p, pairs := readPairs(t, env, in, leases)
	if cfg != nil {
		pairs = byKey(ctx, t, env, pairs, *cfg)
	}
	counts := countByKey(pairs)
	var (
		mu   sync.Mutex
		got  map[string]int64
		done = make(chan struct{})
	)
	stream.ForEachBatch(counts, func(_ context.Context, b *batch.Batch[stream.Pair[string, int64]]) error {
		m := map[string]int64{}
		total := int64(0)
		for p := range b.All() {
			m[p.Key] = p.Value
			total += p.Value
		}
		mu.Lock()
		defer mu.Unlock()
		if done == nil {
			// Counted. The drain's batches may hold fewer keys: with state
			// per shard, a shard's keys go with its lease when it is
			// handed back.
			return nil
		}
		if got = m; total >= int64(n) {
			close(done)
			done = nil
		}
		return nil
	})
	runUntil(ctx, t, p, done, nil)
	mu.Lock()
	defer mu.Unlock()
	return got
}

// runUntil runs p until wait is closed, calling meanwhile (if not nil)
// once Run has started, then drains p; it fails t if Run returns before,
// or with an error.
func runUntil(ctx context.Context, t testing.TB, p *stream.Pipeline, wait <-chan struct{}, meanwhile func()) {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- p.Run(ctx) }()
	if meanwhile != nil {
		meanwhile()
	}
	select {
	case <-wait:
	case err := <-errc:
		t.Fatalf("Run returned early: %v", err)
	}
	p.Drain(context.Background())
	if err := <-errc; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// TestByKeyDropsReplayedCopies: a batch written twice to an existing
// intermediate stream (as a batch replayed after a crash writes its records
// again, with the same tags) is counted once.
func TestByKeyDropsReplayedCopies(t *testing.T) {
	env := servers.Env(t)
	ctx := testContext(t)
	const n, replayed = 500, 300
	in := putInput(t, env, 2, n)
	mid := localaws.UniqueName(t)
	if err := env.CreateStream(ctx, mid, 2); err != nil {
		t.Fatal(err)
	}
	w, err := sink.New(sink.Config[encoded]{Client: env.Kinesis(), Stream: mid, Origin: "repartition",
		Record: func(e encoded) (string, []byte) { return e.partitionKey, e.data }})
	if err != nil {
		t.Fatal(err)
	}
	c := codec[string, int64]{stream.JSONCodec[string](), stream.JSONCodec[int64]()}
	recs := make([]encoded, replayed)
	for i := range recs {
		recs[i] = c.encode(stream.Pair[string, int64]{Key: "replayed-" + strconv.Itoa(i%5), Value: 1})
	}
	b := batch.New(batch.Time(1000), nil, recs)
	for range 2 {
		if err := w.Write(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	got := runCount(ctx, t, env, in, n+replayed, &Config[string, int64]{Stream: mid})
	for i := range 5 {
		if k := "replayed-" + strconv.Itoa(i); got[k] != replayed/5 {
			t.Errorf("key %q: count %d, want %d (each record once)", k, got[k], replayed/5)
		}
	}
}

// TestByKeyWithLeases counts after ByKey with leases on the source and on
// the intermediate stream (one worker, the same leasetable.Config, with a
// StateDir): the pipeline is accepted, the counts are exact, and the
// intermediate stream's leases are in a table of their own, named after it.
func TestByKeyWithLeases(t *testing.T) {
	env := servers.Env(t)
	ctx := testContext(t)
	const n = 1000
	in := putInput(t, env, 4, n)
	leases := &leasetable.Config{Endpoint: env.DynamoDBEndpoint, StateDir: t.TempDir()}
	mid := localaws.UniqueName(t)
	got := runCount(ctx, t, env, in, n, &Config[string, int64]{Stream: mid, Shards: 2, Writer: "worker-1", Leases: leases})
	checkCounts(t, inputCounts(n, nil), got)
	out, err := env.DynamoDB().Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(mid + ".leases")})
	if err != nil {
		t.Fatalf("the intermediate stream's lease table: %v", err)
	}
	if len(out.Items) != 2 {
		t.Errorf("%d items in table %s.leases, want 2 (a lease per shard)", len(out.Items), mid)
	}
}

// readShards returns the data of every user record of every shard of name,
// each shard's in order (aggregates split), and checks the stream has 3
// shards.
func readShards(t *testing.T, kc *awskinesis.Client, name string) map[string][][]byte {
	t.Helper()
	ctx := t.Context()
	shards, err := kc.ListShards(ctx, &awskinesis.ListShardsInput{StreamName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	if len(shards.Shards) != 3 {
		t.Errorf("intermediate stream: %d shards, want 3 (Config.Shards)", len(shards.Shards))
	}
	out := map[string][][]byte{}
	for _, sh := range shards.Shards {
		it, err := kc.GetShardIterator(ctx, &awskinesis.GetShardIteratorInput{StreamName: aws.String(name),
			ShardId: sh.ShardId, ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
		if err != nil {
			t.Fatal(err)
		}
		for iter := it.ShardIterator; iter != nil; {
			page, err := kc.GetRecords(ctx, &awskinesis.GetRecordsInput{ShardIterator: iter})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range page.Records {
				users, _, err := kpl.Deaggregate(r.Data, aws.ToString(r.PartitionKey))
				if err != nil {
					t.Fatal(err)
				}
				for _, u := range users {
					out[*sh.ShardId] = append(out[*sh.ShardId], u.Data)
				}
			}
			if len(page.Records) == 0 {
				break
			}
			iter = page.NextShardIterator
		}
	}
	return out
}

// TestByKeyAcceptsStateOnAFleet: with leases on the source, a stateful
// operator on the source's records is refused (stream.ErrSplitState), and
// accepted after ByKey, whose receiver is declared partitioned by key. No
// call is made: Validate checks the graph.
func TestByKeyAcceptsStateOnAFleet(t *testing.T) {
	awsCfg := aws.Config{Region: "us-east-1"}
	build := func(repartition bool, dead stream.DeadLetters) error {
		recv, err := source.New(source.Config{Stream: "in", App: "fleet", AWS: &awsCfg, Leases: &leasetable.Config{}})
		if err != nil {
			t.Fatal(err)
		}
		p, err := stream.NewPipeline(stream.Config{BatchInterval: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		pairs := stream.Map(stream.From(p, recv), func(r source.Record) stream.Pair[string, int] {
			return stream.Pair[string, int]{Key: string(r.Data), Value: 1}
		})
		if repartition {
			if pairs, err = ByKey(t.Context(), pairs, Config[string, int]{Stream: "mid", Writer: "worker-1", AWS: &awsCfg, Leases: &leasetable.Config{}, DeadLetters: dead}); err != nil {
				t.Fatal(err)
			}
		}
		counts := stream.UpdateStateByKey(pairs, func(_ string, vs []int, s int, _ bool) (int, bool) { return s + len(vs), true })
		stream.Print(counts, 1)
		return p.Validate()
	}
	if err := build(false, nil); !errors.Is(err, stream.ErrSplitState) {
		t.Errorf("without ByKey: Validate = %v, want ErrSplitState", err)
	}
	if err := build(true, nil); err != nil {
		t.Errorf("with ByKey: Validate = %v, want nil", err)
	}
	if err := build(true, &memLetters{}); err != nil {
		t.Errorf("with ByKey and DeadLetters: Validate = %v, want nil", err)
	}
}

// TestByKeyDefaultAWSConfigError: a default AWS configuration that does
// not load (AWS_PROFILE naming no profile) fails ByKey with an error
// naming the client it was for and how to avoid loading it, as the Kinesis
// receiver's does.
func TestByKeyDefaultAWSConfigError(t *testing.T) {
	t.Setenv("AWS_CONFIG_FILE", os.DevNull)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", os.DevNull)
	t.Setenv("AWS_PROFILE", "weir-no-such-profile")
	p, err := stream.NewPipeline(stream.Config{BatchInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	pairs := stream.Map(stream.From[int](p, nil), func(int) stream.Pair[string, int] { return stream.Pair[string, int]{} })
	_, err = ByKey(t.Context(), pairs, Config[string, int]{Stream: "mid"})
	if want := "repartition: loading the default AWS configuration for Kinesis (set Config.AWS or Config.Client to avoid it)"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("ByKey = %v, want an error saying %q", err, want)
	}
}

// TestByKeyBadConfig: every bad field is named in the error.
func TestByKeyBadConfig(t *testing.T) {
	awsCfg := aws.Config{Region: "us-east-1"}
	for _, tc := range []struct {
		name string
		cfg  Config[string, int]
		want []string
	}{
		{"no stream", Config[string, int]{AWS: &awsCfg}, []string{"Stream \"\""}},
		{"bad stream", Config[string, int]{Stream: "a/b", AWS: &awsCfg}, []string{"Stream \"a/b\""}},
		{"shards", Config[string, int]{Stream: "s", Shards: -1, AWS: &awsCfg}, []string{"Shards -1"}},
		{"writer", Config[string, int]{Stream: "s", Writer: strings.Repeat("w", 117), AWS: &awsCfg}, []string{"Writer: 117 bytes: must be at most 116"}},
		{"client and AWS", Config[string, int]{Stream: "s", AWS: &awsCfg, Client: awskinesis.NewFromConfig(awsCfg)}, []string{"Client is set with AWS"}},
		{"leases", Config[string, int]{Stream: "s", AWS: &awsCfg, Leases: &leasetable.Config{LeaseDuration: -time.Second}},
			[]string{"Leases.LeaseDuration -1s: must be > 0"}},
		{"nil dead letters", Config[string, int]{Stream: "s", AWS: &awsCfg, DeadLetters: (*memLetters)(nil)}, []string{"DeadLetters is a nil *repartition.memLetters"}},
		{"all", Config[string, int]{Shards: 20000, Writer: strings.Repeat("w", 200)}, []string{"Stream", "Shards 20000", "Writer: 200"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := stream.NewPipeline(stream.Config{BatchInterval: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			_, err = ByKey(t.Context(), stream.Map(stream.From[int](p, nil), func(int) stream.Pair[string, int] { return stream.Pair[string, int]{} }), tc.cfg)
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("err = %v, want ErrInvalidConfig", err)
			}
			// A refused Config adds nothing to the pipeline.
			if verr := p.Validate(); verr == nil || !strings.Contains(verr.Error(), "no output") {
				t.Errorf("after ByKey's error, Validate = %v: want it to say the pipeline has no output", verr)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %v: does not name %q", err, w)
				}
			}
		})
	}
}

// TestPartitionKey: an encoded key Kinesis takes is its own partition key;
// one it refuses (empty, over 256 characters, not UTF-8) is hashed. Kinesis
// counts a partition key's characters in UTF-16 code units (kinesalite
// refuses 256 emoji, TestKinesaliteKeyLengthInUTF16 in sink/kinesis), so a
// key of 129 emoji is hashed too.
func TestPartitionKey(t *testing.T) {
	long := strings.Repeat("é", 256)
	emoji := strings.Repeat("\U0001F600", 128)
	for _, tc := range []struct {
		key    string
		hashed bool
	}{
		{`"a"`, false}, {long, false}, {long + "x", true}, {"", true}, {"\xff", true},
		{emoji, false}, {emoji + "\U0001F600", true}, {`"` + emoji + `"`, true},
	} {
		got := partitionKey([]byte(tc.key))
		if hashed := strings.HasPrefix(got, hashedKeyPrefix) && got != tc.key; hashed != tc.hashed {
			t.Errorf("partitionKey(%.20q) = %.20q, hashed %v, want %v", tc.key, got, hashed, tc.hashed)
		}
		if hashkey.PartitionKeyLen(got) > hashkey.MaxPartitionKeyLen || got == "" {
			t.Errorf("partitionKey(%.20q) = %.20q: not a partition key Kinesis takes", tc.key, got)
		}
	}
}

// logBuffer is a bytes.Buffer safe for a logger's concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// checkNotRetried fails t if logs show an output tried again: a refused
// configuration is the same at every try, and fails Run at once.
func checkNotRetried(t *testing.T, logs *logBuffer) {
	t.Helper()
	if got := logs.String(); strings.Contains(got, "trying again") {
		t.Errorf("the refusal was tried again before Run failed:\n%s", got)
	}
}

// TestByKeyRefusesNoLeasesOnAFleet: ByKey without Leases on a pipeline
// whose source shares its shards (leases) stops Run at its first write,
// with an error wrapping ErrInvalidConfig that names Leases. Before, it ran:
// every worker of the fleet read every shard of the intermediate stream
// from its trim horizon at each start, so each record was counted once per
// worker, each worker's outputs holding every key. It fails at once: it
// went through the output's retries first (about 7 s of "trying again"
// warnings).
func TestByKeyRefusesNoLeasesOnAFleet(t *testing.T) {
	env := servers.Env(t)
	ctx := testContext(t)
	const n = 100
	in := putInput(t, env, 2, n)
	var logs logBuffer
	p, pairs := readPairsLogged(t, env, in, &leasetable.Config{Endpoint: env.DynamoDBEndpoint, StateDir: t.TempDir()},
		slog.New(slog.NewTextHandler(&logs, nil)))
	shuffled := byKey(ctx, t, env, pairs, Config[string, int64]{Stream: localaws.UniqueName(t), Shards: 1})
	counted := make(chan struct{})
	var once sync.Once
	stream.ForEachBatch(shuffled, func(_ context.Context, b *batch.Batch[stream.Pair[string, int64]]) error {
		if b.Len() > 0 {
			once.Do(func() { close(counted) })
		}
		return nil
	})
	errc := make(chan error, 1)
	go func() { errc <- p.Run(ctx) }()
	select {
	case err := <-errc:
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "Leases") {
			t.Errorf("Run = %v, want an error wrapping ErrInvalidConfig naming Leases", err)
		}
		checkNotRetried(t, &logs)
	case <-counted:
		t.Error("Run read the intermediate stream back without Leases, on a source sharing its shards")
		p.Stop()
		<-errc
	}
}

// TestByKeyRefusesAStreamTwice: a second ByKey of a pipeline to the stream
// a first one writes is refused, with nothing added: each ByKey's reader
// would read every record of the stream, so each would pass on the other's
// records too (its keyed state counting both), with no error anywhere.
func TestByKeyRefusesAStreamTwice(t *testing.T) {
	awsCfg := aws.Config{Region: "us-east-1"}
	p, err := stream.NewPipeline(stream.Config{BatchInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	pairs := stream.Map(stream.From[int](p, nil), func(int) stream.Pair[string, int] { return stream.Pair[string, int]{} })
	if _, err := ByKey(t.Context(), pairs, Config[string, int]{Stream: "shuffle", AWS: &awsCfg}); err != nil {
		t.Fatal(err)
	}
	before := p.Shape()
	_, err = ByKey(t.Context(), pairs, Config[string, int]{Stream: "shuffle", AWS: &awsCfg})
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("second ByKey to stream shuffle: err = %v, want ErrInvalidConfig", err)
	}
	for _, w := range []string{`Stream "shuffle"`, "stream.Union"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("err = %v: does not name %q", err, w)
		}
	}
	if diff := cmp.Diff(before, p.Shape()); diff != "" {
		t.Errorf("the refused ByKey changed the pipeline's shape (-before +after):\n%s", diff)
	}
	// Another stream is another shuffle.
	if _, err := ByKey(t.Context(), pairs, Config[string, int]{Stream: "shuffle2", AWS: &awsCfg}); err != nil {
		t.Errorf("ByKey to another stream: %v", err)
	}
}

// streamStatus is an HTTP client that answers DescribeStream with the
// status status instead of ACTIVE, as Kinesis does while a stream is
// being resharded (UPDATING) or deleted (DELETING): kinesalite, whose
// updates are instant, never holds either long.
type streamStatus struct {
	next   awskinesis.HTTPClient
	status types.StreamStatus
}

func (u streamStatus) Do(req *http.Request) (*http.Response, error) {
	resp, err := u.next.Do(req)
	if err != nil || !strings.HasSuffix(req.Header.Get("X-Amz-Target"), ".DescribeStream") {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	body = bytes.ReplaceAll(body, []byte(`"StreamStatus":"ACTIVE"`), []byte(`"StreamStatus":"`+u.status+`"`))
	resp.Body, resp.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	resp.Header.Del("Content-Length")
	return resp, nil
}

// TestByKeyTakesAStreamBeingResharded: ByKey with Shards given, on a stream
// that exists and is UPDATING (being resharded, which DESIGN.md says the
// intermediate stream may be, and which keeps serving reads and writes),
// goes on at once: it waited for ACTIVE, silently, and failed after 5
// minutes, so a worker restarted during a reshard could not start.
func TestByKeyTakesAStreamBeingResharded(t *testing.T) {
	if err := byKeyOnAStream(t, types.StreamStatusUpdating); err != nil {
		t.Fatalf("ByKey on a stream being resharded: %v", err)
	}
}

// TestByKeyRefusesAStreamBeingDeleted: ByKey with Shards given, on a
// stream that exists and is DELETING, fails at once with an error naming
// the stream, its status and what to do: it waited for ACTIVE, silently,
// and failed after 5 minutes with the waiter's "exceeded max wait time".
func TestByKeyRefusesAStreamBeingDeleted(t *testing.T) {
	err := byKeyOnAStream(t, types.StreamStatusDeleting)
	if err == nil {
		t.Fatal("ByKey on a stream being deleted: no error")
	}
	for _, w := range []string{"DELETING", "being deleted", "start again"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("err = %v: does not say %q", err, w)
		}
	}
}

// byKeyOnAStream creates a stream, which a client describes with status
// status, and returns what ByKey with Shards given says of it, with 30 s
// to say it (the bound only ends the test if ByKey waits for ACTIVE).
func byKeyOnAStream(t *testing.T, status types.StreamStatus) error {
	t.Helper()
	env := servers.Env(t)
	name := localaws.UniqueName(t)
	if err := env.CreateStream(t.Context(), name, 2); err != nil {
		t.Fatal(err)
	}
	kc := env.Kinesis(func(o *awskinesis.Options) { o.HTTPClient = streamStatus{next: o.HTTPClient, status: status} })
	out, err := kc.DescribeStream(t.Context(), &awskinesis.DescribeStreamInput{StreamName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	if st := out.StreamDescription.StreamStatus; st != status {
		t.Fatalf("the wrapped client describes the stream %s, want %s", st, status)
	}
	p, err := stream.NewPipeline(stream.Config{BatchInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	pairs := stream.Map(stream.From[int](p, nil), func(int) stream.Pair[string, int] { return stream.Pair[string, int]{} })
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err = ByKey(ctx, pairs, Config[string, int]{Stream: name, Shards: 4, Client: kc})
	return err
}

// TestByKeyRefusesItsSourceStream: ByKey given as intermediate stream the
// stream the pipeline's Kinesis source reads stops Run at its first write,
// before writing anything, with an error wrapping ErrInvalidConfig that
// names the stream. Before, it wrote the records into its own input, which
// read them again, without end; only its reader's failure to decode the
// source's own records stopped Run, saying to set DeadLetters, which then
// let the loop run on (as here). It fails at once: it went through the
// output's retries first (about 7 s of "trying again" warnings).
func TestByKeyRefusesItsSourceStream(t *testing.T) {
	env := servers.Env(t)
	ctx := testContext(t)
	const n = 20
	in := putInput(t, env, 2, n)
	var logs logBuffer
	p, pairs := readPairsLogged(t, env, in, nil, slog.New(slog.NewTextHandler(&logs, nil)))
	shuffled := byKey(ctx, t, env, pairs, Config[string, int64]{Stream: in, DeadLetters: &memLetters{}})
	looped := make(chan struct{})
	var once sync.Once
	stream.ForEachBatch(shuffled, func(_ context.Context, b *batch.Batch[stream.Pair[string, int64]]) error {
		if b.Len() > 0 { // the source's records are not ByKey's: only one it wrote decodes
			once.Do(func() { close(looped) })
		}
		return nil
	})
	errc := make(chan error, 1)
	go func() { errc <- p.Run(ctx) }()
	select {
	case err := <-errc:
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), strconv.Quote(in)) {
			t.Errorf("Run = %v, want an error wrapping ErrInvalidConfig naming stream %q", err, in)
		}
		checkNotRetried(t, &logs)
	case <-looped:
		t.Error("ByKey wrote to the stream its pipeline reads, and read its records back")
		p.Stop()
		<-errc
	}
}
