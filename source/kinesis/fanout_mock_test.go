package kinesis

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go/eventstream"
	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/internal/kpl"
	"github.com/weirstream/weir/internal/lease"
	"github.com/weirstream/weir/internal/localaws"
	"github.com/weirstream/weir/source"
)

// fanOutSpy wraps a kinesis-mock client: it counts the fan-out calls and
// can refuse the first SubscribeToShard calls with ResourceInUseException.
type fanOutSpy struct {
	*awskinesis.Client
	inUse atomic.Int32 // SubscribeToShard calls still to refuse

	mu         sync.Mutex
	subscribes map[string]int // by shard
	registers  int
}

func (s *fanOutSpy) SubscribeToShard(ctx context.Context, in *awskinesis.SubscribeToShardInput, o ...func(*awskinesis.Options)) (*awskinesis.SubscribeToShardOutput, error) {
	s.mu.Lock()
	if s.subscribes == nil {
		s.subscribes = make(map[string]int)
	}
	s.subscribes[aws.ToString(in.ShardId)]++
	s.mu.Unlock()
	if s.inUse.Add(-1) >= 0 {
		return nil, &types.ResourceInUseException{Message: aws.String("injected by the test")}
	}
	return s.Client.SubscribeToShard(ctx, in, o...)
}

func (s *fanOutSpy) RegisterStreamConsumer(ctx context.Context, in *awskinesis.RegisterStreamConsumerInput, o ...func(*awskinesis.Options)) (*awskinesis.RegisterStreamConsumerOutput, error) {
	s.mu.Lock()
	s.registers++
	s.mu.Unlock()
	return s.Client.RegisterStreamConsumer(ctx, in, o...)
}

// counts returns the SubscribeToShard calls by shard and the
// RegisterStreamConsumer calls.
func (s *fanOutSpy) counts() (map[string]int, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	subs := make(map[string]int, len(s.subscribes))
	for k, v := range s.subscribes {
		subs[k] = v
	}
	return subs, s.registers
}

// cutStreams is an HTTP client for kinesis-mock that breaks the event
// stream of the first n SubscribeToShard answers that start with an event
// (not an exception) two bytes into the message after that event, with a
// connection reset.
type cutStreams struct {
	next aws.HTTPClient
	n    atomic.Int32
}

func (c *cutStreams) Do(req *http.Request) (*http.Response, error) {
	resp, err := c.next.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK || !strings.HasSuffix(req.Header.Get("X-Amz-Target"), ".SubscribeToShard") {
		return resp, err
	}
	// An event-stream message starts with its total length (4 bytes, big
	// endian), which counts those 4 bytes.
	var prelude [4]byte
	if _, err := io.ReadFull(resp.Body, prelude[:]); err != nil {
		return resp, nil // the SDK sees the same error
	}
	first := make([]byte, binary.BigEndian.Uint32(prelude[:]))
	copy(first, prelude[:])
	if _, err := io.ReadFull(resp.Body, first[4:]); err != nil {
		return resp, nil
	}
	msg, err := eventstream.NewDecoder().Decode(bytes.NewReader(first), nil)
	var body io.Reader = io.MultiReader(bytes.NewReader(first), resp.Body)
	if err == nil && msg.Headers.Get(":message-type").String() == "event" && c.n.Add(-1) >= 0 {
		// The connection is reset two bytes into the next message. (A
		// stream cut by an EOF reads as one Kinesis ended: the SDK maps
		// io.ErrUnexpectedEOF to io.EOF.)
		reset := &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
		body = io.MultiReader(bytes.NewReader(first), bytes.NewReader([]byte{0, 0}), failingReader{reset})
	}
	resp.Body = struct {
		io.Reader
		io.Closer
	}{body, resp.Body}
	return resp, nil
}

type failingReader struct{ err error }

func (f failingReader) Read([]byte) (int, error) { return 0, f.err }

// mockFanOut is a kinesis-mock server and the client of its tests.
type mockFanOut struct {
	env *localaws.Env
	// client is for the test's own calls (puts, reshards).
	client *awskinesis.Client
}

// newSpy returns a spy over a kinesis-mock client for a receiver, with the
// SDK's retries off; cut breaks the first SubscribeToShard streams.
func (m *mockFanOut) newSpy(cut int) *fanOutSpy {
	return &fanOutSpy{Client: m.env.KinesisMock(func(o *awskinesis.Options) {
		o.Retryer = aws.NopRetryer{}
		if cut > 0 {
			c := &cutStreams{next: o.HTTPClient}
			c.n.Store(int32(cut))
			o.HTTPClient = c
		}
	})}
}

// config returns a fan-out receiver config for stream through spy.
func (m *mockFanOut) config(stream string, spy *fanOutSpy) Config {
	return Config{
		Stream: stream, App: "fanout-test", InitialPosition: TrimHorizon, Client: spy,
		PollInterval: time.Millisecond, ShardSyncInterval: 20 * time.Millisecond,
		RetryBaseDelay: 10 * time.Millisecond, RetryMaxDelay: 200 * time.Millisecond,
		FanOut: &FanOutConfig{ConsumerName: "weir-" + stream[len(stream)-8:], minSubscribeInterval: 50 * time.Millisecond},
	}
}

// stream creates a stream of shards shards.
func (m *mockFanOut) stream(t *testing.T, shards int) string {
	t.Helper()
	name := localaws.UniqueName(t)
	if err := localaws.CreateStreamOn(t.Context(), m.client, name, shards); err != nil {
		t.Fatal(err)
	}
	return name
}

// put puts records on stream.
func (m *mockFanOut) put(t *testing.T, stream string, records [][]byte) {
	t.Helper()
	if err := localaws.PutRecordsOn(t.Context(), m.client, stream, records, nil); err != nil {
		t.Fatal(err)
	}
}

// watched is a collector that signals each push, so a test can wait for a
// count of records.
type watched struct {
	*collector
	pushed chan struct{} // 1 slot: a push happened
}

func (w *watched) push(ctx context.Context, b source.Block[Record]) (batch.BlockInfo, error) {
	info, err := w.collector.push(ctx, b)
	select {
	case w.pushed <- struct{}{}:
	default:
	}
	return info, err
}

// startWatched starts a receiver of cfg whose pushes a test can wait for.
func startWatched(t *testing.T, cfg Config, want int) (*running, *watched) {
	t.Helper()
	r, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	w := &watched{collector: newCollector(want), pushed: make(chan struct{}, 1)}
	run := &running{r: r, c: w.collector, errc: make(chan error, 1)}
	rt := source.Runtime[Record]{Push: w.push, BlockInterval: 5 * time.Millisecond, ReportError: w.reportError}
	go func() { run.errc <- r.Start(context.Background(), rt) }()
	t.Cleanup(func() { run.stop(t) })
	return run, w
}

// waitFor waits until the receiver pushed at least n records.
func (w *watched) waitFor(t *testing.T, run *running, n int) {
	t.Helper()
	guard := time.NewTimer(waitLimit)
	defer guard.Stop()
	for len(w.records()) < n {
		select {
		case <-w.pushed:
		case err := <-run.errc:
			run.errc <- err
			t.Fatalf("Start returned with %d of %d records: %v", len(w.records()), n, err)
		case <-guard.C:
			t.Fatalf("only %d of %d records arrived within %v; stats %+v", len(w.records()), n, waitLimit, run.r.Stats())
		}
	}
}

// putInRounds puts data in rounds of size records, each once the receiver
// pushed every record of the rounds before: records keep coming across
// subscriptions.
func (m *mockFanOut) putInRounds(t *testing.T, stream string, data [][]byte, size int, run *running, w *watched) {
	t.Helper()
	before := len(w.records()) // records put earlier and already read
	for i := 0; i < len(data); i += size {
		end := min(i+size, len(data))
		m.put(t, stream, data[i:end])
		w.waitFor(t, run, before+end)
	}
}

// startCompleting is startWatched for a receiver with leases: each block
// is reported completed as soon as it is stored, as a driver whose batches
// succeed at once would.
func startCompleting(t *testing.T, cfg Config, want int) (*running, *watched) {
	t.Helper()
	r, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	w := &watched{collector: newCollector(want), pushed: make(chan struct{}, 1)}
	run := &running{r: r, c: w.collector, errc: make(chan error, 1)}
	push := func(ctx context.Context, b source.Block[Record]) (batch.BlockInfo, error) {
		info, err := w.push(ctx, b)
		if err == nil {
			r.blocksCompleted(ctx, []batch.BlockInfo{info})
		}
		return info, err
	}
	rt := source.Runtime[Record]{Push: push, BlockInterval: 5 * time.Millisecond, ReportError: w.reportError}
	go func() { run.errc <- r.Start(context.Background(), rt) }()
	t.Cleanup(func() { run.stop(t) })
	return run, w
}

// checkFanOutRead checks what a fan-out receiver pushed: every payload
// exactly once, shard order, ranges, and Recompute (through GetRecords)
// giving back every block.
func checkFanOutRead(t *testing.T, stream string, want [][]byte, run *running) {
	t.Helper()
	got := run.c.records()
	checkExactlyOnce(t, want, got)
	checkShardOrder(t, got)
	blocks := run.c.snapshot()
	checkRanges(t, stream, blocks)
	checkRecompute(t, run.r, blocks)
}

// TestFanOutOnKinesisMock reads with enhanced fan-out from kinesis-mock,
// the local server that has it. Its subtests share the package's
// kinesis-mock (mockServers); each has streams of its own, kept small (kinesis-mock is slow to put to, and
// pushes one event a second per subscription).
func TestFanOutOnKinesisMock(t *testing.T) {
	t.Parallel()
	env := mockServers.Env(t)
	m := &mockFanOut{env: env, client: env.KinesisMock()}

	t.Run("ExactlyOnceInShardOrder", func(t *testing.T) {
		t.Parallel()
		stream := m.stream(t, 3)
		var data [][]byte
		for a := range 20 { // KPL aggregates among plain records
			// m.put gives aggregate a the partition key a: its user records
			// have it too, so that the shard it lands on holds them, as the
			// KPL routes an aggregate.
			var users []kpl.UserRecord
			for u := range a%5 + 1 {
				users = append(users, kpl.UserRecord{PartitionKey: strconv.Itoa(a), Data: fmt.Appendf(nil, "agg-%d-%d", a, u)})
			}
			data = append(data, kpl.Aggregate(users))
		}
		m.put(t, stream, data)
		want := kplPayloads(data)
		plain := payloads("x", 600)
		want = append(want, plain...)
		spy := m.newSpy(0)
		run, w := startWatched(t, m.config(stream, spy), len(want))
		w.waitFor(t, run, len(want)-len(plain)) // the aggregates' user records, put before the start
		m.putInRounds(t, stream, plain, 200, run, w)
		run.stop(t)

		checkFanOutRead(t, stream, want, run)
		aggregated := 0
		for _, r := range run.c.records() {
			if r.Aggregated {
				aggregated++
			}
		}
		if aggregated != len(want)-len(plain) {
			t.Errorf("%d user records came out of KPL aggregates, want %d", aggregated, len(want)-len(plain))
		}
		subs, _ := spy.counts()
		if len(subs) != 3 {
			t.Errorf("SubscribeToShard calls by shard %v: want each of the 3 shards subscribed", subs)
		}
	})

	t.Run("ResubscribesWhenTheLifetimeEnds", func(t *testing.T) {
		t.Parallel()
		stream := m.stream(t, 2)
		spy := m.newSpy(0)
		cfg := m.config(stream, spy)
		cfg.FanOut.lifetime = 1500 * time.Millisecond // kinesis-mock sends an event a second
		data := payloads("l", 500)
		run, w := startWatched(t, cfg, len(data))
		m.putInRounds(t, stream, data, 100, run, w)
		run.stop(t)

		checkFanOutRead(t, stream, data, run)
		subs, _ := spy.counts()
		for shard, n := range subs {
			if n < 2 {
				t.Errorf("shard %s subscribed %d times over several lifetimes, want >= 2", shard, n)
			}
		}
	})

	t.Run("ResubscribesAfterErrors", func(t *testing.T) {
		t.Parallel()
		stream := m.stream(t, 2)
		const cuts, refusals = 6, 3
		spy := m.newSpy(cuts)
		spy.inUse.Store(refusals)
		data := payloads("e", 500)
		run, w := startWatched(t, m.config(stream, spy), len(data))
		m.putInRounds(t, stream, data, 100, run, w)
		run.stop(t)

		checkFanOutRead(t, stream, data, run)
		retries := run.r.Stats().Retries
		if retries[string(causeTransport)] < cuts || retries[string(causeResourceInUse)] < refusals {
			t.Errorf("retries %v: want >= %d transport (broken streams) and >= %d resource_in_use", retries, cuts, refusals)
		}
	})

	t.Run("Reshard", func(t *testing.T) {
		t.Parallel()
		stream := m.stream(t, 2)
		data := payloads("r", 400)
		m.put(t, stream, data[:200])
		spy := m.newSpy(0)
		run, w := startWatched(t, m.config(stream, spy), len(data))
		w.waitFor(t, run, 100)
		if _, err := m.client.UpdateShardCount(t.Context(), &awskinesis.UpdateShardCountInput{
			StreamName: aws.String(stream), TargetShardCount: aws.Int32(4), ScalingType: types.ScalingTypeUniformScaling,
		}); err != nil {
			t.Fatal(err)
		}
		waitActive(t, m.client, stream)
		m.put(t, stream, data[200:])
		w.waitFor(t, run, len(data))
		run.stop(t)

		checkFanOutRead(t, stream, data, run)
		checkLineage(t, t.Context(), m.client, stream, run.c.snapshot())
		for shard, st := range run.r.Stats().Shards {
			if st.RecordsRead > 0 && !st.Ended && !isOpen(t, m.client, stream, shard) {
				t.Errorf("closed shard %s was read but not ended: %+v", shard, st)
			}
		}
	})

	t.Run("LeasesAndCheckpoints", func(t *testing.T) {
		t.Parallel()
		ddb := servers.Env(t).DynamoDB()
		stream := m.stream(t, 2)
		table := stream
		data := payloads("k", 300)
		m.put(t, stream, data[:200])
		leased := func(worker string) Config {
			cfg := m.config(stream, m.newSpy(0))
			cfg.Leases = &leasetable.Config{TableName: table, DynamoDB: ddb, WorkerID: worker, LeaseDuration: 2 * time.Second, CheckpointInterval: 100 * time.Millisecond}
			return cfg
		}

		// The first worker reads what is there, completes it as it is
		// stored, and stops gracefully: its last checkpoints are made and
		// its leases handed back.
		run, w := startCompleting(t, leased("w1"), 200)
		w.waitFor(t, run, 200)
		run.stop(t)
		checkFanOutRead(t, stream, data[:200], run)
		last := map[string]string{}
		for _, r := range run.c.records() {
			last[r.ShardID] = batch.MaxSeq(last[r.ShardID], r.SequenceNumber)
		}
		tbl, err := lease.NewTable(lease.TableConfig{Name: table, Client: ddb})
		if err != nil {
			t.Fatal(err)
		}
		leases, err := tbl.List(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, l := range leases {
			got[l.Shard] = l.Checkpoint
			if l.Owner != "" {
				t.Errorf("lease %s still owned by %q after a graceful stop", l.Shard, l.Owner)
			}
		}
		if diff := cmp.Diff(last, got); diff != "" {
			t.Errorf("checkpoints (-last read +lease table):\n%s", diff)
		}

		// The next worker subscribes after the checkpoints: only new
		// records.
		run2, w2 := startCompleting(t, leased("w2"), 100)
		m.put(t, stream, data[200:])
		w2.waitFor(t, run2, 100)
		run2.stop(t)
		checkFanOutRead(t, stream, data[200:], run2)
	})

	t.Run("Consumer", func(t *testing.T) {
		t.Parallel()
		stream := m.stream(t, 1)
		data := payloads("c", 20)
		m.put(t, stream, data)
		readAll := func(t *testing.T, cfg Config) {
			t.Helper()
			run, w := startWatched(t, cfg, len(data))
			w.waitFor(t, run, len(data))
			run.stop(t)
			checkExactlyOnce(t, data, run.c.records())
		}
		describe := func(in *awskinesis.DescribeStreamConsumerInput) (*types.ConsumerDescription, error) {
			out, err := m.client.DescribeStreamConsumer(t.Context(), in)
			if err != nil {
				return nil, err
			}
			return out.ConsumerDescription, nil
		}
		sum, err := m.client.DescribeStreamSummary(t.Context(), &awskinesis.DescribeStreamSummaryInput{StreamName: aws.String(stream)})
		if err != nil {
			t.Fatal(err)
		}
		streamARN := sum.StreamDescriptionSummary.StreamARN

		// A new name is registered, once; the next receiver reuses it.
		spy := m.newSpy(0)
		cfg := m.config(stream, spy)
		readAll(t, cfg)
		spy2 := m.newSpy(0)
		readAll(t, m.config(stream, spy2))
		if _, n := spy.counts(); n != 1 {
			t.Errorf("first receiver: %d RegisterStreamConsumer calls, want 1", n)
		}
		if _, n := spy2.counts(); n != 0 {
			t.Errorf("second receiver: %d RegisterStreamConsumer calls, want 0 (reuse)", n)
		}
		kept, err := describe(&awskinesis.DescribeStreamConsumerInput{StreamARN: streamARN, ConsumerName: aws.String(cfg.FanOut.ConsumerName)})
		if err != nil || kept.ConsumerStatus != types.ConsumerStatusActive {
			t.Fatalf("consumer after two receivers stopped: %+v, %v; want it kept, ACTIVE", kept, err)
		}

		// A consumer given by ARN is used as it is.
		spy3 := m.newSpy(0)
		byARN := m.config(stream, spy3)
		byARN.FanOut = &FanOutConfig{ConsumerARN: aws.ToString(kept.ConsumerARN), minSubscribeInterval: 50 * time.Millisecond}
		readAll(t, byARN)
		if _, n := spy3.counts(); n != 0 {
			t.Errorf("receiver given ConsumerARN: %d RegisterStreamConsumer calls, want 0", n)
		}

		// DeregisterOnStop removes it when Start returns.
		last := m.config(stream, m.newSpy(0))
		last.FanOut.DeregisterOnStop = true
		readAll(t, last)
		_, err = describe(&awskinesis.DescribeStreamConsumerInput{ConsumerARN: kept.ConsumerARN})
		var notFound *types.ResourceNotFoundException
		if !errors.As(err, &notFound) {
			t.Errorf("DescribeStreamConsumer after a DeregisterOnStop receiver stopped: %v, want ResourceNotFoundException", err)
		}
	})
}

// kplPayloads returns the user records' payloads of KPL aggregates.
func kplPayloads(aggregates [][]byte) [][]byte {
	var out [][]byte
	for _, a := range aggregates {
		users, _, err := kpl.Deaggregate(a, "k")
		if err != nil {
			panic(err)
		}
		for _, u := range users {
			out = append(out, u.Data)
		}
	}
	return out
}

// isOpen reports whether shard of stream is open.
func isOpen(t *testing.T, c *awskinesis.Client, stream, shard string) bool {
	t.Helper()
	for _, s := range openShards(t, c, stream) {
		if aws.ToString(s.ShardId) == shard {
			return true
		}
	}
	return false
}
