package repartition

import (
	"strconv"
	"strings"
	"testing"

	"github.com/weirstream/weir/internal/localaws"
	"github.com/weirstream/weir/stream"
)

// paddingCodec is JSON, but pads the encoding of the key bad with pad
// spaces, which JSON decodes past: the key decodes back to bad, and
// encodes to the same bytes again.
type paddingCodec struct {
	stream.Codec[string]
	bad string
	pad int
}

func (c paddingCodec) Encode(ks []string) ([]byte, error) {
	b, err := c.Codec.Encode(ks)
	if err == nil && len(ks) == 1 && ks[0] == c.bad {
		b = append(b, strings.Repeat(" ", c.pad)...)
	}
	return b, err
}

// TestByKeyRecordTooLarge: a pair whose record is over Kinesis's 1 MiB
// (data and partition key) was left to sink/kinesis, which refused it: with
// Config.DeadLetters, Run still stopped at every start, and without it Run
// advised stream.Quarantine, which ByKey's output cannot be given. Now ByKey
// refuses it as it encodes it, allowing for its origin tag: without
// DeadLetters, Run stops naming the record (shard, sequence number), its
// size, the limit and DeadLetters; with it, each record of the key is sent
// to the dead letters, naming the size and the limit, and the others are
// counted once.
func TestByKeyRecordTooLarge(t *testing.T) {
	env := servers.Env(t)
	const n, bad = 300, "user-3"
	codec := paddingCodec{Codec: stream.JSONCodec[string](), bad: bad, pad: 1 << 20}
	limit := strconv.Itoa(recordLimit)

	t.Run("stops", func(t *testing.T) {
		ctx := testContext(t)
		in := putInput(t, env, 2, n)
		err := runStop(ctx, t, env, in, Config[string, int64]{Stream: localaws.UniqueName(t), Shards: 1, KeyCodec: codec})
		checkStop(t, err, `"user-3"`, "shardId-", "sequence number", "bytes", limit, "Config.DeadLetters")
	})

	t.Run("quarantines", func(t *testing.T) {
		checkKeyQuarantined(t, env, n, bad, codec, `"user-3"`, limit)
	})
}

// TestByKeyRefusedRecordNamesDeadLetters: a record sink/kinesis refuses
// (a stream.RecordErrors) stopped Run with the driver's advice,
// stream.Quarantine, which ByKey's output cannot be given. Now the error
// names the record (shard, sequence number), sink/kinesis's reason and
// Config.DeadLetters, and Run stops at once, not after retries. ByKey's own
// size check (raised here) refuses such a record first.
func TestByKeyRefusedRecordNamesDeadLetters(t *testing.T) {
	env := servers.Env(t)
	saved := recordLimit
	recordLimit = 10 << 20
	t.Cleanup(func() { recordLimit = saved })
	const n, bad = 300, "user-3"
	codec := paddingCodec{Codec: stream.JSONCodec[string](), bad: bad, pad: 1 << 20}
	ctx := testContext(t)
	in := putInput(t, env, 2, n)
	err := runStop(ctx, t, env, in, Config[string, int64]{Stream: localaws.UniqueName(t), Shards: 1, KeyCodec: codec})
	checkStop(t, err, "shardId-", "sequence number", "MaxRecordBytes", "Config.DeadLetters")
}

// TestEncodeRecordLimit: encode takes a record of recordLimit bytes, data
// and partition key, and refuses one a byte longer, naming its size.
func TestEncodeRecordLimit(t *testing.T) {
	const base = 1 << 16 // a key's length takes a 3-byte uvarint from 16384 bytes on
	c := codec[string, int64]{key: paddingCodec{Codec: stream.JSONCodec[string](), bad: "k", pad: base}, value: stream.JSONCodec[int64]()}
	e := c.encode(stream.Pair[string, int64]{Key: "k", Value: 1})
	if e.err != nil {
		t.Fatal(e.err)
	}
	// A longer key adds as many bytes to the record (its length's
	// uvarint is 3 bytes for every pad, its partition key a hash).
	fit := base + recordLimit - len(e.partitionKey) - len(e.data)
	for _, tc := range []struct {
		pad  int
		fits bool
	}{{fit, true}, {fit + 1, false}} {
		c.key = paddingCodec{Codec: stream.JSONCodec[string](), bad: "k", pad: tc.pad}
		e := c.encode(stream.Pair[string, int64]{Key: "k", Value: 1})
		if size := len(e.partitionKey) + len(e.data); e.err == nil && size != recordLimit {
			t.Fatalf("pad %d: %d bytes, want %d", tc.pad, size, recordLimit)
		}
		if fits := e.err == nil; fits != tc.fits {
			t.Errorf("pad %d: encode error %v, want it to fit %v", tc.pad, e.err, tc.fits)
		}
		if want := strconv.Itoa(recordLimit + 1); !tc.fits && (e.err == nil || !strings.Contains(e.err.Error(), want)) {
			t.Errorf("pad %d: error %v does not name the size %s", tc.pad, e.err, want)
		}
	}
}
