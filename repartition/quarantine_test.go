package repartition

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/localaws"
	source "github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/stream"
)

// memLetters is a stream.DeadLetters in memory: each call replaces the
// letters of its batch and output, as the contract asks.
type memLetters struct {
	mu sync.Mutex
	by map[[2]int64][]stream.DeadLetter
}

func (m *memLetters) Quarantine(_ context.Context, letters []stream.DeadLetter) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.by == nil {
		m.by = map[[2]int64][]stream.DeadLetter{}
	}
	m.by[[2]int64{int64(letters[0].Time), int64(letters[0].Output)}] = letters
	return nil
}

func (m *memLetters) all() []stream.DeadLetter {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []stream.DeadLetter
	for _, ls := range m.by {
		out = append(out, ls...)
	}
	return out
}

// refusingCodec is JSON, but refuses to encode the key bad.
type refusingCodec struct {
	stream.Codec[string]
	bad string
}

func (c refusingCodec) Encode(ks []string) ([]byte, error) {
	for _, k := range ks {
		if k == c.bad {
			return nil, fmt.Errorf("key %q refused", k)
		}
	}
	return c.Codec.Encode(ks)
}

// runStop runs the count of runCount, through ByKey configured by cfg,
// and returns the error Run stops with.
func runStop(ctx context.Context, t *testing.T, env *localaws.Env, in string, cfg Config[string, int64]) error {
	t.Helper()
	p, pairs := readPairs(t, env, in, nil)
	counts := countByKey(byKey(ctx, t, env, pairs, cfg))
	stream.ForEachBatch(counts, func(context.Context, *batch.Batch[stream.Pair[string, int64]]) error { return nil })
	err := p.Run(ctx)
	if err == nil || ctx.Err() != nil {
		t.Fatalf("Run = %v (ctx %v), want it to stop with an error", err, ctx.Err())
	}
	t.Logf("Run = %v", err)
	return err
}

// checkStop fails t unless err, the error Run stopped with, names each
// of wants, and not the driver's advice of stream.Quarantine, which
// ByKey's output cannot be given.
func checkStop(t *testing.T, err error, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Run = %v: does not name %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "stream.Quarantine(d)") {
		t.Errorf("Run = %v: advises stream.Quarantine, which ByKey's output cannot be given", err)
	}
}

// checkKeyQuarantined counts n records of an input of one shard
// (putInput's) through ByKey with codec and Config.DeadLetters, and fails
// t unless every record of the key bad is a dead letter holding the
// record, its error naming each of wants, and the others are counted once.
func checkKeyQuarantined(t *testing.T, env *localaws.Env, n int, bad string, codec stream.Codec[string], wants ...string) {
	t.Helper()
	ctx := testContext(t)
	in := putInput(t, env, 1, n) // one shard: the last record counted is read after every record of the key
	want, good := countsWithout(n, bad)
	dead := &memLetters{}
	got := runCount(ctx, t, env, in, good, &Config[string, int64]{Stream: localaws.UniqueName(t), Shards: 2, KeyCodec: codec, DeadLetters: dead})
	checkCounts(t, want, got)
	if _, ok := got[bad]; ok {
		t.Errorf("key %q counted: %d", bad, got[bad])
	}
	letters := dead.all()
	if len(letters) != n-good {
		t.Errorf("%d letters, want %d (a record of key %q each)", len(letters), n-good, bad)
	}
	for _, l := range letters {
		if !strings.Contains(string(l.Record), bad) {
			t.Errorf("letter's record %.300q: want the record of key %q", l.Record, bad)
		}
		for _, w := range wants {
			if !strings.Contains(l.Err, w) {
				t.Errorf("letter's error %.300q does not name %q", l.Err, w)
			}
		}
	}
}

// countsWithout returns the counts of the keys of the first n records of
// an input (putInput's) but bad, and how many records they count.
func countsWithout(n int, bad string) (map[string]int64, int) {
	want := inputCounts(n, func(k string) bool { return k == bad })
	good := 0
	for _, c := range want {
		good += int(c)
	}
	return want, good
}

// TestByKeyUndecodableRecord: a record on the intermediate stream that
// does not decode (put there by another program) stopped Run at every
// start, with an error that named neither the fix nor the stream. Now,
// without Config.DeadLetters, Run stops with an error naming the stream,
// the shard, the record's sequence number and Config.DeadLetters; with it,
// the record is sent to the dead letters (shard and sequence number in its
// error, the record as read) and every other record is counted once.
func TestByKeyUndecodableRecord(t *testing.T) {
	env := servers.Env(t)
	const n = 300
	// mid returns an intermediate stream of one shard holding one record
	// that does not decode (its first byte says the key is 110 bytes
	// long), and that record's sequence number.
	mid := func(ctx context.Context) (string, string) {
		name := localaws.UniqueName(t)
		if err := env.CreateStream(ctx, name, 1); err != nil {
			t.Fatal(err)
		}
		out, err := env.Kinesis().PutRecord(ctx, &awskinesis.PutRecordInput{StreamName: aws.String(name),
			PartitionKey: aws.String("other"), Data: []byte("not a record")})
		if err != nil {
			t.Fatal(err)
		}
		return name, aws.ToString(out.SequenceNumber)
	}

	t.Run("stops", func(t *testing.T) {
		ctx := testContext(t)
		in := putInput(t, env, 2, n)
		name, seq := mid(ctx)
		err := runStop(ctx, t, env, in, Config[string, int64]{Stream: name})
		checkStop(t, err, name, "shardId-000000000000", seq, "Config.DeadLetters")
	})

	t.Run("quarantines", func(t *testing.T) {
		ctx := testContext(t)
		in := putInput(t, env, 2, n)
		name, seq := mid(ctx)
		dead := &memLetters{}
		got := runCount(ctx, t, env, in, n, &Config[string, int64]{Stream: name, DeadLetters: dead})
		checkCounts(t, inputCounts(n, nil), got)
		letters := dead.all()
		if len(letters) != 1 {
			t.Fatalf("%d letters, want 1: %+v", len(letters), letters)
		}
		l := letters[0]
		for _, want := range []string{"shardId-000000000000", seq} {
			if !strings.Contains(l.Err, want) {
				t.Errorf("letter's error %q does not name %q", l.Err, want)
			}
		}
		var r source.Record
		if err := json.Unmarshal(l.Record, &r); err != nil || string(r.Data) != "not a record" || r.SequenceNumber != seq {
			t.Errorf("letter's record %s (%v): want the record read, of sequence number %s", l.Record, err, seq)
		}
		if !strings.Contains(l.OutputName, "repartition "+name+" undecodable") {
			t.Errorf("letter's output %q: want ByKey's", l.OutputName)
		}
	})
}

// TestByKeyUnencodableKey: a key the KeyCodec refuses stopped Run at every
// start with the codec's error alone, and the fix the error gave
// (stream.Quarantine on the output) could not be given to ByKey's output.
// Now, without Config.DeadLetters, Run stops with an error naming the key,
// its record's shard and sequence number and Config.DeadLetters; with it,
// each record of the key is sent to the dead letters and the others are
// counted once.
func TestByKeyUnencodableKey(t *testing.T) {
	env := servers.Env(t)
	const n, bad = 300, "user-3"
	codec := refusingCodec{Codec: stream.JSONCodec[string](), bad: bad}

	t.Run("stops", func(t *testing.T) {
		ctx := testContext(t)
		in := putInput(t, env, 2, n)
		err := runStop(ctx, t, env, in, Config[string, int64]{Stream: localaws.UniqueName(t), Shards: 1, KeyCodec: codec})
		checkStop(t, err, `"user-3"`, "shardId-", "sequence number", "Config.DeadLetters")
	})

	t.Run("quarantines", func(t *testing.T) {
		checkKeyQuarantined(t, env, n, bad, codec, `"user-3"`)
	})
}

// panickingCodec is JSON, but panics encoding the key bad and decoding
// the encoding of the key undecodable: a user's codec with a bug.
type panickingCodec struct {
	stream.Codec[string]
	bad, undecodable string
}

func (c panickingCodec) Encode(ks []string) ([]byte, error) {
	for _, k := range ks {
		if k == c.bad {
			panic("codec bug encoding " + k)
		}
	}
	return c.Codec.Encode(ks)
}

func (c panickingCodec) Decode(b []byte) ([]string, error) {
	if ks, err := c.Codec.Decode(b); err == nil && len(ks) == 1 && ks[0] == c.undecodable {
		panic("codec bug decoding " + ks[0])
	}
	return c.Codec.Decode(b)
}

// TestByKeyPanickingCodec: a codec that panics on a record, rather than
// returning an error, failed the batch as a whole, the write output's or
// the decoding Transform's, which stream.Quarantine cannot isolate: with
// Config.DeadLetters Run still stopped at every start, with an error
// advising stream.Quarantine, which cannot be given to ByKey's output.
// Now such a record is one ByKey cannot carry, as one the codec refuses:
// without DeadLetters, Run stops naming it and DeadLetters; with it, the
// record is quarantined, its letter holding the panic, and every other
// record is counted once.
func TestByKeyPanickingCodec(t *testing.T) {
	env := servers.Env(t)
	const n, bad, undecodable = 300, "user-3", "planted"
	codec := panickingCodec{Codec: stream.JSONCodec[string](), bad: bad, undecodable: undecodable}
	// mid returns an intermediate stream of one shard holding a record
	// written as ByKey writes one, of key undecodable, and its sequence
	// number.
	mid := func(ctx context.Context) (string, string) {
		name := localaws.UniqueName(t)
		if err := env.CreateStream(ctx, name, 1); err != nil {
			t.Fatal(err)
		}
		e := codec.encodeOf(t, undecodable)
		out, err := env.Kinesis().PutRecord(ctx, &awskinesis.PutRecordInput{StreamName: aws.String(name),
			PartitionKey: aws.String(e.partitionKey), Data: e.data})
		if err != nil {
			t.Fatal(err)
		}
		return name, aws.ToString(out.SequenceNumber)
	}

	t.Run("stops", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			cfg  func(ctx context.Context) (Config[string, int64], []string)
		}{
			{"encoding", func(context.Context) (Config[string, int64], []string) {
				return Config[string, int64]{Stream: localaws.UniqueName(t), Shards: 1, KeyCodec: codec},
					[]string{"key user-3", "codec bug encoding user-3", "panickingCodec.Encode", "Config.DeadLetters"}
			}},
			{"decoding", func(ctx context.Context) (Config[string, int64], []string) {
				name, seq := mid(ctx)
				return Config[string, int64]{Stream: name, KeyCodec: codec},
					[]string{name, seq, "codec bug decoding planted", "panickingCodec.Decode", "Config.DeadLetters"}
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				ctx := testContext(t)
				in := putInput(t, env, 2, n)
				cfg, wants := tc.cfg(ctx)
				checkStop(t, runStop(ctx, t, env, in, cfg), wants...)
			})
		}
	})

	t.Run("quarantines", func(t *testing.T) {
		ctx := testContext(t)
		in := putInput(t, env, 1, n) // one shard: the last record counted is read after every record of the key
		want, good := countsWithout(n, bad)
		name, seq := mid(ctx)
		dead := &memLetters{}
		got := runCount(ctx, t, env, in, good, &Config[string, int64]{Stream: name, KeyCodec: codec, DeadLetters: dead})
		checkCounts(t, want, got)
		for _, k := range []string{bad, undecodable} {
			if _, ok := got[k]; ok {
				t.Errorf("key %q counted: %d", k, got[k])
			}
		}
		var unencodable, undecoded int
		for _, l := range dead.all() {
			switch {
			case strings.Contains(l.Err, "codec bug encoding user-3") && strings.Contains(string(l.Record), bad):
				unencodable++
			case strings.Contains(l.Err, "codec bug decoding planted") && strings.Contains(l.Err, seq):
				undecoded++
			default:
				t.Errorf("letter %+v: want one of a record of key %q or of the record planted", l, bad)
			}
		}
		if unencodable != n-good || undecoded != 1 {
			t.Errorf("%d letters of key %q, want %d; %d of the record planted, want 1", unencodable, bad, n-good, undecoded)
		}
	})
}

// encodeOf returns the record ByKey writes for key k, of value 1.
func (c panickingCodec) encodeOf(t *testing.T, k string) encoded {
	t.Helper()
	// With the codec c wraps: the same bytes, and encode's check that the
	// key decodes back (which c panics at for undecodable) is passed.
	e := codec[string, int64]{key: c.Codec, value: stream.JSONCodec[int64]()}.encode(stream.Pair[string, int64]{Key: k, Value: 1})
	if e.err != nil {
		t.Fatal(e.err)
	}
	return e
}
