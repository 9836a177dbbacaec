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
		for _, want := range []string{name, "shardId-000000000000", seq, "Config.DeadLetters"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("Run = %v: does not name %q", err, want)
			}
		}
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
		for _, want := range []string{`"user-3"`, "shardId-", "sequence number", "Config.DeadLetters"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("Run = %v: does not name %q", err, want)
			}
		}
	})

	t.Run("quarantines", func(t *testing.T) {
		ctx := testContext(t)
		in := putInput(t, env, 1, n) // one shard: the last record counted is read after every record of the key
		want := inputCounts(n, func(k string) bool { return k == bad })
		good := 0
		for _, c := range want {
			good += int(c)
		}
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
			if !strings.Contains(l.Err, `"user-3"`) || !strings.Contains(string(l.Record), bad) {
				t.Errorf("letter %+v: want the record of key %q and an error naming it", l, bad)
			}
		}
	})
}
