package kinesis_test

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	gocmp "github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/kpl"
	"github.com/weirstream/weir/internal/origin"
	"github.com/weirstream/weir/sink/kinesis"
)

// rec is a test record: a partition key and an index, its data "key/index".
type rec struct {
	Key string
	I   int
}

func recordOf(r rec) (string, []byte) { return r.Key, []byte(r.Key + "/" + strconv.Itoa(r.I)) }

// parse returns the record data names, less any origin tag and padding
// of zero bytes.
func parse(t testing.TB, data []byte) rec {
	t.Helper()
	if _, payload, ok, err := origin.Decode(data); err != nil {
		t.Fatalf("tag: %v", err)
	} else if ok {
		data = payload
	}
	if end := bytes.IndexByte(data, 0); end >= 0 { // padding
		data = data[:end]
	}
	key, i, ok := strings.Cut(string(data), "/")
	n, err := strconv.Atoi(i)
	if !ok || err != nil {
		t.Fatalf("record data %q", data)
	}
	return rec{key, n}
}

// fakeStream is a PutRecords that fails the records fail chooses, checks
// the limits and the sink's rules on every call, and keeps what it wrote.
type fakeStream struct {
	t    testing.TB
	fail func(call int, r rec) string // an error code, or "" to write r
	err  func(call int) error         // an error of the whole call, or nil
	// maxBytes is the most bytes of records a call may hold, maxRecord
	// of one record.
	maxBytes, maxRecord int

	mu         sync.Mutex
	calls      int
	written    []rec        // user records, in the order written
	tags       []origin.Tag // their origin tags, if tagged
	aggregates int          // user records that came in aggregates
	acked      map[int]bool
}

func (f *fakeStream) PutRecords(_ context.Context, in *awskinesis.PutRecordsInput, _ ...func(*awskinesis.Options)) (*awskinesis.PutRecordsOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		if err := f.err(f.calls); err != nil {
			return nil, err
		}
	}
	if n := len(in.Records); n == 0 || n > 500 {
		f.t.Errorf("call %d: %d records", f.calls, n)
	}
	keys, size := map[string]bool{}, 0
	low := 0
	for f.acked[low] {
		low++
	}
	out := &awskinesis.PutRecordsOutput{}
	for _, e := range in.Records {
		key := aws.ToString(e.PartitionKey)
		size += len(key) + len(e.Data)
		if len(key)+len(e.Data) > f.maxRecord {
			f.t.Errorf("call %d: a record of %d bytes", f.calls, len(key)+len(e.Data))
		}
		if keys[key] {
			f.t.Errorf("call %d: two records of key %q", f.calls, key)
		}
		keys[key] = true
		users, aggregated, err := kpl.Deaggregate(e.Data, key)
		if err != nil {
			f.t.Errorf("call %d: %v", f.calls, err)
		}
		f.aggregates += len(users) * boolInt(aggregated)
		var rs []rec
		for _, u := range users {
			r := parse(f.t, u.Data)
			if r.I >= low+origin.Window {
				f.t.Errorf("call %d: record %d sent while %d is not acknowledged", f.calls, r.I, low)
			}
			rs = append(rs, r)
		}
		if code := f.fail(f.calls, rs[0]); code != "" {
			out.FailedRecordCount = aws.Int32(aws.ToInt32(out.FailedRecordCount) + 1)
			out.Records = append(out.Records, types.PutRecordsResultEntry{ErrorCode: aws.String(code), ErrorMessage: aws.String("injected")})
			continue
		}
		for k, r := range rs {
			f.written = append(f.written, r)
			f.acked[r.I] = true
			if tag, _, ok, _ := origin.Decode(users[k].Data); ok {
				f.tags = append(f.tags, tag)
			}
		}
		out.Records = append(out.Records, types.PutRecordsResultEntry{ShardId: aws.String("shardId-0"), SequenceNumber: aws.String(strconv.Itoa(len(f.written)))})
	}
	if size > f.maxBytes {
		f.t.Errorf("call %d: %d bytes", f.calls, size)
	}
	return out, nil
}

func newFake(t testing.TB, fail func(call int, r rec) string) *fakeStream {
	if fail == nil {
		fail = func(int, rec) string { return "" }
	}
	return &fakeStream{t: t, fail: fail, acked: map[int]bool{}, maxBytes: 5 << 20, maxRecord: 1 << 20}
}

func newSink(t testing.TB, client kinesis.Client, origin string, aggregate bool) *kinesis.Sink[rec] {
	t.Helper()
	s, err := kinesis.New(kinesis.Config[rec]{Client: client, Stream: "out", Record: recordOf, Origin: origin, Aggregate: aggregate})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// writeThrough writes want in one batch with a Sink of cfg (Client f,
// Stream "out", Record recordOf unless set) and checks f got each record
// once, in order per key.
func writeThrough(t *testing.T, f *fakeStream, cfg kinesis.Config[rec], want []rec) {
	t.Helper()
	cfg.Client, cfg.Stream = f, "out"
	if cfg.Record == nil {
		cfg.Record = recordOf
	}
	s, err := kinesis.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Write(t.Context(), batch.New(1000, nil, want)); err != nil {
		t.Fatal(err)
	}
	checkOnceInOrder(t, want, f.written)
}

// records returns n records spread over keys, with a hot key "hot" taking
// every hotEvery-th one when hotEvery > 0.
func records(n, keys, hotEvery int) []rec {
	rs := make([]rec, n)
	for i := range rs {
		rs[i] = rec{Key: "k" + strconv.Itoa(i%keys), I: i}
		if hotEvery > 0 && i%hotEvery == 0 {
			rs[i].Key = "hot"
		}
	}
	return rs
}

// checkOnceInOrder checks that written holds every record of want once,
// and each key's records in want's order.
func checkOnceInOrder(t testing.TB, want, written []rec) {
	t.Helper()
	byKey := func(rs []rec) map[string][]int {
		m := map[string][]int{}
		for _, r := range rs {
			m[r.Key] = append(m[r.Key], r.I)
		}
		return m
	}
	if diff := gocmp.Diff(byKey(want), byKey(written)); diff != "" {
		t.Errorf("records per key, in stream order (-want +got):\n%s", diff)
	}
}

// TestWriteKeepsKeyOrderThroughPartialFailures fails random records of
// every call, including later records of a key whose earlier one failed:
// every record is written once and each key's records in batch order.
func TestWriteKeepsKeyOrderThroughPartialFailures(t *testing.T) {
	for _, tc := range []struct {
		name           string
		n, keys, hot   int
		failOneIn, tag int
		aggregate      bool
	}{
		{"many keys", 3000, 700, 0, 3, 0, false},
		{"few keys", 2000, 3, 0, 2, 0, false},
		{"hot key past the window", 3 * origin.Window, 5000, 4, 10, 1, false},
		{"few keys aggregated", 2000, 3, 0, 2, 0, true},
		{"hot key aggregated past the window", 3 * origin.Window, 5000, 4, 10, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(1, 2))
				codes := []string{"ProvisionedThroughputExceededException", "InternalFailure"}
				f := newFake(t, func(int, rec) string {
					if rng.IntN(tc.failOneIn) == 0 {
						return codes[rng.IntN(2)]
					}
					return ""
				})
				name := ""
				if tc.tag == 1 {
					name = "app/out"
				}
				want := records(tc.n, tc.keys, tc.hot)
				if err := newSink(t, f, name, tc.aggregate).Write(t.Context(), batch.New(1000, nil, want)); err != nil {
					t.Fatal(err)
				}
				checkOnceInOrder(t, want, f.written)
				if tc.aggregate && f.aggregates == 0 {
					t.Error("no record was aggregated")
				}
			})
		})
	}
}

// TestWriteAggregates checks that records of one key go into aggregates of
// at most MaxRecordBytes, so that a batch of few keys needs few calls.
func TestWriteAggregates(t *testing.T) {
	for _, tc := range []struct {
		maxRecord, n, keys, calls int
	}{
		{0, 3000, 3, 1},       // every key's records in one aggregate
		{4096, 3000, 3, 7},    // tagged records of ~20 bytes: ~150 to an aggregate of 4 KiB
		{0, 30000, 30000, 60}, // distinct keys: nothing to aggregate
	} {
		t.Run(fmt.Sprint(tc.maxRecord, "/", tc.keys), func(t *testing.T) {
			f := newFake(t, nil)
			f.maxRecord = cmp.Or(tc.maxRecord, 1<<20)
			writeThrough(t, f, kinesis.Config[rec]{Origin: "w", Aggregate: true, MaxRecordBytes: tc.maxRecord}, records(tc.n, tc.keys, 0))
			if f.calls != tc.calls {
				t.Errorf("%d calls, want %d", f.calls, tc.calls)
			}
		})
	}
}

// TestWriteAggregatesInOrderUnevenSizes fills aggregates with records of
// uneven sizes: once a record does not fit in its key's aggregate, no later
// (smaller) record of the key may take its place.
func TestWriteAggregatesInOrderUnevenSizes(t *testing.T) {
	f := newFake(t, nil)
	f.maxRecord = 4096
	writeThrough(t, f, kinesis.Config[rec]{Aggregate: true, MaxRecordBytes: 4096, Record: func(r rec) (string, []byte) {
		key, data := recordOf(r)
		if r.I%3 == 0 {
			data = append(data, make([]byte, 1500)...) // padding, which parse drops
		}
		return key, data
	}}, records(300, 2, 0))
}

// TestWriteRetriesCallErrors retries a call that fails for a reason a
// retry can fix, and fails Write, naming the stream, for one it cannot.
func TestWriteRetriesCallErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(t, nil)
		f.err = func(call int) error {
			switch call {
			case 1:
				return &types.ProvisionedThroughputExceededException{Message: aws.String("slow down")}
			case 2:
				return &types.KMSThrottlingException{Message: aws.String("kms")}
			case 3:
				return &types.InternalFailureException{Message: aws.String("oops")}
			}
			return nil
		}
		want := records(10, 3, 0)
		if err := newSink(t, f, "", false).Write(t.Context(), batch.New(1000, nil, want)); err != nil {
			t.Fatal(err)
		}
		checkOnceInOrder(t, want, f.written)

		f = newFake(t, nil)
		f.err = func(int) error { return &types.ResourceNotFoundException{Message: aws.String("no stream")} }
		err := newSink(t, f, "", false).Write(t.Context(), batch.New(1000, nil, want))
		var rnf *types.ResourceNotFoundException
		if !errors.As(err, &rnf) || !strings.Contains(err.Error(), `"out"`) {
			t.Errorf("Write = %v, want a ResourceNotFoundException naming the stream", err)
		}
		if f.calls != 1 {
			t.Errorf("%d calls for an error no retry fixes, want 1", f.calls)
		}
	})
}

// TestWriteStopsWithCtx stops retrying records that keep failing when ctx
// is done.
func TestWriteStopsWithCtx(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(t, func(int, rec) string { return "ProvisionedThroughputExceededException" })
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- newSink(t, f, "", false).Write(ctx, batch.New(1000, nil, records(5, 5, 0))) }()
		synctest.Wait()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Write = %v, want context.Canceled", err)
		}
	})
}

// TestWriteLogsStall checks that records that keep failing are logged, at
// WARN, with the stream and the error code, and that the end of the streak
// is too.
func TestWriteLogsStall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs bytes.Buffer
		f := newFake(t, func(call int, _ rec) string {
			if call <= 6 {
				return "ProvisionedThroughputExceededException"
			}
			return ""
		})
		s, err := kinesis.New(kinesis.Config[rec]{Client: f, Stream: "out", Record: recordOf,
			Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Write(t.Context(), batch.New(1000, nil, records(3, 3, 0))); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{
			`level=WARN msg="kinesis sink: PutRecords keeps failing; still retrying until it succeeds" op=PutRecords stream=out`,
			`cause=ProvisionedThroughputExceededException attempts=5`,
			`level=WARN msg="kinesis sink: PutRecords succeeded again after failed attempts" op=PutRecords stream=out`,
		} {
			if !strings.Contains(logs.String(), want) {
				t.Errorf("logs lack %q:\n%s", want, logs.String())
			}
		}
	})
}

// TestWriteRefusesInvalidRecords checks every record before sending any.
func TestWriteRefusesInvalidRecords(t *testing.T) {
	long := strings.Repeat("ü", 257)
	for _, tc := range []struct {
		name string
		r    rec
		want string
	}{
		{"empty key", rec{Key: ""}, `record 2 of batch 1000, partition key "": empty`},
		{"long key", rec{Key: long}, "257 characters"},
		{"bad key", rec{Key: "\xff"}, "not valid UTF-8"},
		{"too large", rec{Key: "big", I: -1}, `partition key "big": 1048577 bytes of data and origin tag and partition key, more than MaxRecordBytes (1048576)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, nil)
			s, err := kinesis.New(kinesis.Config[rec]{Client: f, Stream: "out", Origin: "w", Record: func(r rec) (string, []byte) {
				if r.I == -1 {
					return r.Key, make([]byte, 1<<20-len(r.Key)-origin.Overhead(origin.Tag{Writer: "w", Batch: 1000, Index: 2})+1)
				}
				return recordOf(r)
			}})
			if err != nil {
				t.Fatal(err)
			}
			err = s.Write(t.Context(), batch.New(1000, nil, []rec{{"a", 0}, {"b", 1}, tc.r}))
			if !errors.Is(err, kinesis.ErrInvalidRecord) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Write = %v, want ErrInvalidRecord with %q", err, tc.want)
			}
			if f.calls != 0 {
				t.Errorf("%d calls made for a batch with an invalid record", f.calls)
			}
		})
	}
}

// TestWriteOriginTags checks that the records of a batch with origins are
// tagged with them (version 2), with their shard's range start in the
// batch, that a record without one gets a version 1 tag, and that an
// origin outside the batch's ranges fails Write before anything is sent.
func TestWriteOriginTags(t *testing.T) {
	ranges := []batch.SeqRange{
		{Stream: "in", Shard: "s1", First: "120", Last: "130", Count: 2},
		{Stream: "in", Shard: "s2", First: "99", Last: "99", Count: 1},
		{Stream: "in", Shard: "s1", First: "140", Last: "150", Count: 1},
	}
	b := batch.New(1000, []batch.BlockInfo{{Ranges: ranges, Count: 4}}, []rec{{"a", 0}, {"b", 1}, {"c", 2}, {"d", 3}})
	wb := b.WithOrigins([]batch.Origin{
		{Stream: "in", Shard: "s1", Seq: "120", SubSeq: 2},
		{Stream: "in", Shard: "s2", Seq: "99", Index: 1},
		{},
		{Stream: "in", Shard: "s1", Seq: "1000", Index: 3},
	})
	f := newFake(t, nil)
	s, err := kinesis.New(kinesis.Config[rec]{Client: f, Stream: "out", Origin: "w", Record: recordOf})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Write(t.Context(), wb); err != nil {
		t.Fatal(err)
	}
	want := []origin.Tag{
		{Stream: "in", Shard: "s1", Seq: "120", SubSeq: 2, RangeStart: "120"},
		{Stream: "in", Shard: "s2", Seq: "99", Index: 1, RangeStart: "99"},
		{Writer: "w", Batch: 1000, Index: 2},
		{Stream: "in", Shard: "s1", Seq: "1000", Index: 3, RangeStart: "120"},
	}
	got := make([]origin.Tag, 4)
	for k, r := range f.written {
		got[r.I] = f.tags[k]
	}
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("tags (-want +got):\n%s", diff)
	}

	for name, o := range map[string]batch.Origin{
		"another shard":    {Stream: "in", Shard: "s3", Seq: "120"},
		"before the range": {Stream: "in", Shard: "s1", Seq: "119"},
		"not a sequence":   {Stream: "in", Shard: "s1", Seq: "12a"},
		"a negative index": {Stream: "in", Shard: "s1", Seq: "125", Index: -1},
	} {
		f := newFake(t, nil)
		s, _ := kinesis.New(kinesis.Config[rec]{Client: f, Stream: "out", Origin: "w", Record: recordOf})
		err := s.Write(t.Context(), b.WithOrigins([]batch.Origin{{}, {}, o, {}}))
		if !errors.Is(err, kinesis.ErrInvalidRecord) || !strings.Contains(err.Error(), "record 2 of batch 1000") || f.calls != 0 {
			t.Errorf("%s: Write = %v after %d calls, want ErrInvalidRecord for record 2 before any call", name, err, f.calls)
		}
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	_, err := kinesis.New(kinesis.Config[rec]{Origin: strings.Repeat("o", 129), MaxRecordBytes: 11 << 20})
	if !errors.Is(err, kinesis.ErrInvalidConfig) {
		t.Fatalf("New = %v, want ErrInvalidConfig", err)
	}
	for _, field := range []string{"Client nil", "Stream empty", "Record nil", "Origin of 129 bytes", "MaxRecordBytes 11534336"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("error %q does not name %q", err, field)
		}
	}
	// A name or ARN Kinesis refuses is refused before any batch: "events
	// out" would otherwise fail the first batch with a ValidationException.
	for stream, want := range map[string]string{
		"events out":                `Stream "events out": a stream name may hold only letters`,
		"arn:aws:s3:::bucket":       `Stream "arn:aws:s3:::bucket": an ARN must look like`,
		strings.Repeat("s", 129):    "a stream name has at most 128 characters",
		"arn:aws:kinesis:us-east-1": "an ARN must look like",
	} {
		_, err := kinesis.New(kinesis.Config[rec]{Client: newFake(t, nil), Stream: stream, Record: recordOf})
		if !errors.Is(err, kinesis.ErrInvalidConfig) || !strings.Contains(err.Error(), want) {
			t.Errorf("New with Stream %q = %v, want ErrInvalidConfig saying %q", stream, err, want)
		}
	}
}

// TestWriteEmptyBatch sends nothing.
func TestWriteEmptyBatch(t *testing.T) {
	f := newFake(t, nil)
	if err := newSink(t, f, "w", false).Write(t.Context(), batch.New[rec](1000, nil)); err != nil || f.calls != 0 {
		t.Errorf("Write(empty) = %v with %d calls", err, f.calls)
	}
}

// TestWriteCallSizes checks that calls hold at most 5 MiB of records, or
// 10 MiB when MaxRecordBytes allows records over 1 MiB, and that a record
// as large as MaxRecordBytes is written.
func TestWriteCallSizes(t *testing.T) {
	for _, tc := range []struct {
		maxRecord, callBytes, size, n, calls int
	}{
		{0, 5 << 20, 900 << 10, 12, 3},      // 5 records of 900 KiB a call
		{10 << 20, 10 << 20, 3 << 20, 7, 3}, // 3 records of 3 MiB a call
		{10 << 20, 10 << 20, 10<<20 - 64, 2, 2},
	} {
		t.Run(fmt.Sprint(tc.maxRecord, "/", tc.size), func(t *testing.T) {
			f := newFake(t, nil)
			f.maxBytes, f.maxRecord = tc.callBytes, cmp.Or(tc.maxRecord, 1<<20)
			writeThrough(t, f, kinesis.Config[rec]{MaxRecordBytes: tc.maxRecord, Record: func(r rec) (string, []byte) {
				key, data := recordOf(r)
				return key, append(data, make([]byte, tc.size-len(data)-len(key))...)
			}}, records(tc.n, tc.n, 0))
			if f.calls != tc.calls {
				t.Errorf("%d calls, want %d", f.calls, tc.calls)
			}
		})
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestWriteRefusedNamesFix checks that a PutRecords call Kinesis refuses
// for good fails Write naming the stream and the fix: the IAM action to
// allow and the sink's policy, the KMS key's, or the stream to create.
func TestWriteRefusedNamesFix(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want []string
	}{
		{"access denied", &types.AccessDeniedException{Message: aws.String("not authorized")},
			[]string{"fix: allow kinesis:PutRecords on stream out to these credentials", "docs/iam/kinesis-sink.json"}},
		{"KMS access denied", &types.KMSAccessDeniedException{Message: aws.String("no key")},
			[]string{"fix: allow kms:GenerateDataKey on the stream's KMS key", "docs/iam/kinesis-sink.json"}},
		{"KMS key disabled", &types.KMSDisabledException{Message: aws.String("disabled")},
			[]string{"fix: the stream's KMS key is disabled"}},
		{"no stream", &types.ResourceNotFoundException{Message: aws.String("no stream")},
			[]string{"fix: stream out does not exist", "create it"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, nil)
			f.err = func(int) error { return tc.err }
			err := newSink(t, f, "", false).Write(t.Context(), batch.New(1000, nil, records(3, 3, 0)))
			if !errors.Is(err, tc.err) {
				t.Fatalf("Write = %v, want it to wrap %v", err, tc.err)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Write = %v, want an error naming %q", err, want)
				}
			}
		})
	}
}

// TestWriteThrottledCallsWarnThrottling checks, in virtual time, that
// PutRecords calls throttled as a whole, by the stream's shards or by its
// KMS key, are warned of naming that cause and its fix, not the network.
func TestWriteThrottledCallsWarnThrottling(t *testing.T) {
	for _, tc := range []struct {
		name, cause, fix string
		err              error
	}{
		{"shards", "ProvisionedThroughputExceededException", "more shards",
			&types.ProvisionedThroughputExceededException{Message: aws.String("slow down")}},
		{"KMS key", "KMSThrottlingException", "KMS",
			&types.KMSThrottlingException{Message: aws.String("kms")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFake(t, nil)
				f.err = func(call int) error {
					if call <= 5 { // streak.WarnAt
						return tc.err
					}
					return nil
				}
				var logs bytes.Buffer
				s, err := kinesis.New(kinesis.Config[rec]{Client: f, Stream: "out", Record: recordOf, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
				if err != nil {
					t.Fatal(err)
				}
				if err := s.Write(t.Context(), batch.New(1000, nil, records(3, 3, 0))); err != nil {
					t.Fatal(err)
				}
				text := logs.String()
				if !strings.Contains(text, "level=WARN") || !strings.Contains(text, "cause="+tc.cause) || !strings.Contains(text, tc.fix) || strings.Contains(text, "check the network") {
					t.Errorf("want a WARN naming the cause %s and its fix:\n%s", tc.cause, text)
				}
			})
		})
	}
}
