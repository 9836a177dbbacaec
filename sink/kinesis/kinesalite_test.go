package kinesis_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/kpl"
	"github.com/weirstream/weir/internal/localaws"
	"github.com/weirstream/weir/internal/localaws/faults"
	"github.com/weirstream/weir/internal/origin"
	"github.com/weirstream/weir/sink/kinesis"
)

var servers = localaws.NewShared(localaws.Options{Kinesis: true})

func TestMain(m *testing.M) { os.Exit(servers.Run(m)) }

// newStream creates a stream of shards shards on kinesalite for t.
func newStream(t testing.TB, env *localaws.Env, shards int) string {
	t.Helper()
	name := localaws.UniqueName(t)
	if err := env.CreateStream(t.Context(), name, shards); err != nil {
		t.Fatal(err)
	}
	return name
}

// readAll returns the data of every record of every shard of name, each
// shard's in order, with KPL aggregates split into their user records.
func readAll(t testing.TB, kc *awskinesis.Client, name string) map[string][][]byte {
	t.Helper()
	ctx := t.Context()
	shards, err := kc.ListShards(ctx, &awskinesis.ListShardsInput{StreamName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][][]byte{}
	for _, sh := range shards.Shards {
		it, err := kc.GetShardIterator(ctx, &awskinesis.GetShardIteratorInput{StreamName: aws.String(name),
			ShardId: sh.ShardId, ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
		if err != nil {
			t.Fatal(err)
		}
		iter := it.ShardIterator
		for iter != nil {
			page, err := kc.GetRecords(ctx, &awskinesis.GetRecordsInput{ShardIterator: iter})
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Records) == 0 {
				break
			}
			for _, r := range page.Records {
				users, _, err := kpl.Deaggregate(r.Data, aws.ToString(r.PartitionKey))
				if err != nil {
					t.Fatalf("record %s: %v", aws.ToString(r.SequenceNumber), err)
				}
				for _, u := range users {
					out[*sh.ShardId] = append(out[*sh.ShardId], u.Data)
				}
			}
			iter = page.NextShardIterator
		}
	}
	return out
}

// recs parses every record of shards, less their tags, in shard order.
func recs(t testing.TB, shards map[string][][]byte) []rec {
	var rs []rec
	for _, data := range shards {
		for _, d := range data {
			rs = append(rs, parse(t, d))
		}
	}
	return rs
}

// partialFaults is an HTTP client in front of kinesalite that fails the
// PutRecords entries fail chooses, as Kinesis does when a shard is
// throttled: it takes them out of the request it forwards and answers
// them with a ProvisionedThroughputExceededException entry, in place.
type partialFaults struct {
	next aws.HTTPClient
	fail func(r rec, attempt int) bool
	// after, if set, is called after each PutRecords call is answered.
	after func(call int)

	mu       sync.Mutex
	attempts map[rec]int
	calls    int
	failed   int
}

type putRecordsBody struct {
	Records []struct {
		Data         []byte
		PartitionKey string
	}
}

type putRecordsResult struct {
	FailedRecordCount int
	Records           []map[string]string
}

func (p *partialFaults) Do(req *http.Request) (*http.Response, error) {
	if !strings.HasSuffix(req.Header.Get("X-Amz-Target"), ".PutRecords") {
		return p.next.Do(req)
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	var all map[string]json.RawMessage
	var in putRecordsBody
	if err := errors.Join(json.Unmarshal(body, &all), json.Unmarshal(body, &in)); err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.calls++
	call := p.calls
	failed := make([]bool, len(in.Records))
	var kept []json.RawMessage
	var raw []json.RawMessage
	if err := json.Unmarshal(all["Records"], &raw); err != nil {
		p.mu.Unlock()
		return nil, err
	}
	for i, r := range in.Records {
		users, _, err := kpl.Deaggregate(r.Data, r.PartitionKey)
		if err != nil {
			p.mu.Unlock()
			return nil, err
		}
		rc := parse(testingTB{}, users[0].Data) // an aggregate fails as a whole, by its first record
		p.attempts[rc]++
		if failed[i] = p.fail(rc, p.attempts[rc]); failed[i] {
			p.failed++
		} else {
			kept = append(kept, raw[i])
		}
	}
	p.mu.Unlock()
	var res putRecordsResult
	if len(kept) > 0 {
		all["Records"], _ = json.Marshal(kept)
		body, _ = json.Marshal(all)
		fwd := req.Clone(req.Context())
		fwd.Body, fwd.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		resp, err := p.next.Do(fwd)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return resp, nil
		}
		if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
			return nil, err
		}
	}
	var merged []map[string]string
	for _, f := range failed {
		if f {
			merged = append(merged, map[string]string{"ErrorCode": "ProvisionedThroughputExceededException", "ErrorMessage": "Rate exceeded for shard (injected)"})
			continue
		}
		merged, res.Records = append(merged, res.Records[0]), res.Records[1:]
	}
	out, _ := json.Marshal(putRecordsResult{FailedRecordCount: res.FailedRecordCount + len(failed) - len(kept), Records: merged})
	if p.after != nil {
		p.after(call)
	}
	return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"application/x-amz-json-1.1"}},
		Body:          io.NopCloser(bytes.NewReader(out)),
		ContentLength: int64(len(out)), Request: req}, nil
}

// testingTB lets parse fail loudly outside a test's goroutine.
type testingTB struct{ testing.TB }

func (testingTB) Helper()                   {}
func (testingTB) Fatalf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }

func faulty(env *localaws.Env, fail func(r rec, attempt int) bool) (*awskinesis.Client, *partialFaults) {
	p := &partialFaults{next: env.Kinesis().Options().HTTPClient, fail: fail, attempts: map[rec]int{}}
	return env.Kinesis(func(o *awskinesis.Options) { o.HTTPClient = p }), p
}

// TestKinesaliteWritesOnceInOrder writes batches to a real stream, with
// and without failed records, and reads them back: every record once, the
// records of each key in batch order.
func TestKinesaliteWritesOnceInOrder(t *testing.T) {
	env := servers.Env(t)
	// A quarter of the records fail once, every ninth one twice more:
	// later records of their keys in the same call would have been written
	// before them.
	partial := func(r rec, attempt int) bool { return r.I%4 == 1 && attempt == 1 || r.I%9 == 0 && attempt <= 3 }
	for _, tc := range []struct {
		name      string
		fail      func(r rec, attempt int) bool
		aggregate bool
	}{
		{"no faults", func(rec, int) bool { return false }, false},
		{"partial failures", partial, false},
		{"aggregated partial failures", partial, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := newStream(t, env, 3)
			kc, p := faulty(env, tc.fail)
			s, err := kinesis.New(kinesis.Config[rec]{Client: kc, Stream: name, Record: recordOf, Aggregate: tc.aggregate, MaxRecordBytes: 2048})
			if err != nil {
				t.Fatal(err)
			}
			want := records(2000, 40, 0)
			if err := s.Write(t.Context(), batch.New(1000, nil, want[:1500], want[1500:])); err != nil {
				t.Fatal(err)
			}
			got := recs(t, readAll(t, env.Kinesis(), name))
			checkOnceInOrder(t, want, got)
			t.Logf("%d calls, %d records failed", p.calls, p.failed)
		})
	}
}

// TestKinesaliteReplayDeduplicated writes a batch as a crash and a replay
// do, with and without aggregation (records of at most 256 bytes, so that
// a batch takes several calls): a first Write stopped after two calls (with failed records, so that
// later records of the batch are written before earlier ones), then the
// whole batch again, then the next batch. Every record is read back once
// or more; an origin.Filter per shard keeps exactly the records of the two
// batches, once each, in order per key.
func TestKinesaliteReplayDeduplicated(t *testing.T) {
	env := servers.Env(t)
	for _, aggregate := range []bool{false, true} {
		t.Run(fmt.Sprint("aggregate=", aggregate), func(t *testing.T) {
			name := newStream(t, env, 2)
			ctx, crash := context.WithCancel(t.Context())
			kc, _ := faulty(env, func(r rec, attempt int) bool { return r.I%3 == 0 && attempt == 1 })
			cfg := kinesis.Config[rec]{Client: kc, Stream: name, Record: recordOf, Origin: "app/out", Aggregate: aggregate, MaxRecordBytes: 256}
			first := records(3000, 100, 0)
			s, err := kinesis.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			kcCrash, pc := faulty(env, func(r rec, attempt int) bool { return r.I%3 == 0 && attempt == 1 })
			pc.after = func(call int) {
				if call == 2 {
					crash()
				}
			}
			crashCfg := cfg
			crashCfg.Client = kcCrash
			crashing, err := kinesis.New(crashCfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := crashing.Write(ctx, batch.New(1000, nil, first)); !errors.Is(err, context.Canceled) {
				t.Fatalf("crashed Write = %v", err)
			}
			if err := s.Write(t.Context(), batch.New(1000, nil, first)); err != nil { // the replay
				t.Fatal(err)
			}
			second := records(500, 100, 0)
			if err := s.Write(t.Context(), batch.New(2000, nil, second)); err != nil {
				t.Fatal(err)
			}

			shards := readAll(t, env.Kinesis(), name)
			var raw int
			var got1, got2 []rec
			for _, data := range shards {
				raw += len(data)
				f := origin.NewFilter(0)
				for _, d := range data {
					tag, _, ok, err := origin.Decode(d)
					if !ok || err != nil {
						t.Fatalf("record %q not tagged: %v", d, err)
					}
					if !f.Keep(tag) {
						continue
					}
					r := parse(t, d)
					if r.I != int(tag.Index) || tag.Writer != "app/out" {
						t.Fatalf("record %+v tagged %+v", r, tag)
					}
					if tag.Batch == 1000 {
						got1 = append(got1, r)
					} else {
						got2 = append(got2, r)
					}
				}
			}
			if raw <= len(first)+len(second) {
				t.Fatalf("%d records in the stream: the crashed write wrote nothing twice", raw)
			}
			checkOnceInOrder(t, first, got1)
			checkOnceInOrder(t, second, got2)
			t.Logf("%d records in the stream, %d after the filter", raw, len(got1)+len(got2))
		})
	}
}

// TestKinesaliteRecordSize writes a record of exactly MaxRecordBytes (data,
// tag and key) and records that fill more than one 5 MiB call, which
// kinesalite takes, and refuses one byte more, naming the key.
func TestKinesaliteRecordSize(t *testing.T) {
	env := servers.Env(t)
	name := newStream(t, env, 1)
	const key = "big-key"
	tagLen := func(i int) int { return origin.Overhead(origin.Tag{Writer: "w", Batch: 1000, Index: uint64(i)}) }
	s, err := kinesis.New(kinesis.Config[int]{Client: env.Kinesis(), Stream: name, Origin: "w",
		Record: func(n int) (string, []byte) { return fmt.Sprint(key, n%8), bytes.Repeat([]byte{'x'}, n/8) }})
	if err != nil {
		t.Fatal(err)
	}
	full := (1<<20 - len(key) - 1 - tagLen(0)) * 8
	var fill []int
	for i := range 5 {
		fill = append(fill, (900<<10)*8+i)
	}
	if err := s.Write(t.Context(), batch.New(1000, nil, append([]int{full}, fill...))); err != nil {
		t.Fatalf("Write of a record of MaxRecordBytes and 5 of 900 KiB: %v", err)
	}
	err = s.Write(t.Context(), batch.New(1000, nil, []int{full + 8}))
	if !errors.Is(err, kinesis.ErrInvalidRecord) || !strings.Contains(err.Error(), `partition key "big-key0"`) {
		t.Errorf("Write of a record one byte too large = %v", err)
	}
	n := 0
	for _, data := range readAll(t, env.Kinesis(), name) {
		n += len(data)
	}
	if n != 6 {
		t.Errorf("%d records in the stream, want 8", n)
	}
}

// TestKinesaliteSilentCallRetried checks, against kinesalite behind a
// fault-injecting HTTP client, that a PutRecords call whose request gets
// no answer (a connection gone silent) is abandoned after the call
// timeout and retried, instead of holding Write for good, and is logged at
// WARN at once, naming the endpoint (each silent call holds Write 30 s, so
// waiting for the fifth to warn would leave minutes of silence): every
// record is then written once, in order per key.
func TestKinesaliteSilentCallRetried(t *testing.T) {
	env := servers.Env(t)
	name := newStream(t, env, 2)
	tr, err := faults.New(faults.Config{Rules: []faults.Rule{{Operation: "PutRecords", Kind: faults.Hang, Times: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	kc := env.Kinesis(func(o *awskinesis.Options) { o.HTTPClient, o.Retryer = tr, aws.NopRetryer{} })
	var logs bytes.Buffer
	s, err := kinesis.New(kinesis.Config[rec]{Client: kc, Stream: name, Record: recordOf, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	kinesis.SetCallTimeout(s, 100*time.Millisecond)
	// A bound for the test only: without a call timeout, Write waits for
	// the held call until ctx ends.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	want := records(50, 7, 0)
	if err := s.Write(ctx, batch.New(1000, nil, want)); err != nil {
		t.Fatalf("Write with one PutRecords call held silent: %v", err)
	}
	if n := tr.Injected("PutRecords", faults.Hang); n != 1 {
		t.Fatalf("%d PutRecords calls held, want 1", n)
	}
	checkOnceInOrder(t, want, recs(t, readAll(t, env.Kinesis(), name)))
	if text := logs.String(); !strings.Contains(text, "level=WARN") || !strings.Contains(text, "cause=timeout") || !strings.Contains(text, "endpoint=") {
		t.Errorf("want a WARN of the call with no answer, naming the endpoint:\n%s", text)
	}
}

// TestKinesaliteKeyLengthInUTF16 writes a batch whose last record's
// partition key is 256 characters outside the Basic Multilingual Plane:
// 512 UTF-16 code units, which Kinesis's validation counts (kinesalite's,
// modelled on it, refuses the key). Write must refuse the record before
// anything is sent, as for any invalid record, rather than write the
// batch's first call and then fail with a ValidationException.
func TestKinesaliteKeyLengthInUTF16(t *testing.T) {
	env := servers.Env(t)
	name := newStream(t, env, 1)
	s, err := kinesis.New(kinesis.Config[rec]{Client: env.Kinesis(), Stream: name, Record: recordOf})
	if err != nil {
		t.Fatal(err)
	}
	var b []rec
	for i := range 500 { // a full first call, so the bad record goes in the second
		b = append(b, rec{Key: fmt.Sprint("k", i), I: i})
	}
	b = append(b, rec{Key: strings.Repeat("\U0001F600", 256), I: 500})
	err = s.Write(t.Context(), batch.New(1000, nil, b))
	if !errors.Is(err, kinesis.ErrInvalidRecord) || !strings.Contains(err.Error(), "record 500 of batch 1000") {
		t.Errorf("Write = %v, want ErrInvalidRecord naming record 500", err)
	}
	if n := len(recs(t, readAll(t, env.Kinesis(), name))); n != 0 {
		t.Errorf("%d records written by a batch with an invalid record, want 0", n)
	}
}

// TestKinesaliteEmptyData writes a batch one of whose records has no data
// (Record returned a nil slice), which Kinesis takes: a data blob of 0 to
// MaxRecordBytes bytes. The AWS SDK refused the call before sending it
// (a nil Data is a missing required field), and the Sink took that for a
// failure a retry heals: Write retried it until its ctx ended, warning
// "check the network". The record is now written, with empty data, as the
// one whose data is an empty non-nil slice.
func TestKinesaliteEmptyData(t *testing.T) {
	env := servers.Env(t)
	name := newStream(t, env, 1)
	s, err := kinesis.New(kinesis.Config[string]{Client: env.Kinesis(), Stream: name,
		Record: func(v string) (string, []byte) {
			if v == "" {
				return "k", nil
			}
			return "k", []byte(v)
		}})
	if err != nil {
		t.Fatal(err)
	}
	// A bound for the test only: without the fix, Write retries until
	// ctx ends.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := s.Write(ctx, batch.New(1000, nil, []string{"a", "", "b"})); err != nil {
		t.Fatalf("Write of a record with nil data: %v", err)
	}
	got := readAll(t, env.Kinesis(), name)
	var data []string
	for _, d := range got {
		for _, x := range d {
			data = append(data, string(x))
		}
	}
	if fmt.Sprint(data) != "[a  b]" {
		t.Errorf("records written %q, want [a  b]", data)
	}
}
