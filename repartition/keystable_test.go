package repartition

import (
	"errors"
	"strings"
	"testing"

	"github.com/weirstream/weir/stream"
)

// TestKeyNotStableAcrossDecodeRefused: a record is written with the
// partition key of its key's encoding, and placed, once read back, by its
// decoded key's (partitionKeyOf). A key whose encoding changes after one
// decode (a string that is not valid UTF-8: JSONCodec reads it back with
// U+FFFD) was written to one shard's range and placed in another's, where
// on a fleet no worker counted it, lost with nothing said. Such a key is
// now a record ByKey cannot carry (errRecord: a dead letter with
// Config.DeadLetters), named with the fix; a stable key is written as
// before, placed by the partition key it is written with.
func TestKeyNotStableAcrossDecodeRefused(t *testing.T) {
	c := codec[string, int64]{key: stream.JSONCodec[string](), value: stream.JSONCodec[int64]()}
	for _, k := range []string{"user-1", "é-ok", "a\xff", "\xc3\x28id"} {
		e := c.encode(stream.Pair[string, int64]{Key: k, Value: 1})
		if stable := !strings.ContainsRune(strings.ToValidUTF8(k, "\uFFFD"), '\uFFFD'); !stable {
			if !errors.Is(e.err, errRecord) || !strings.Contains(e.err.Error(), "ToValidUTF8") {
				t.Errorf("key %q: encode error %v, want errRecord naming the fix", k, e.err)
			}
			continue
		}
		if e.err != nil {
			t.Fatalf("key %q: %v", k, e.err)
		}
		p, err := c.decode(e.data)
		if err != nil {
			t.Fatal(err)
		}
		if placed := c.partitionKeyOf(p.Key); placed != e.partitionKey {
			t.Errorf("key %q: written with partition key %q, placed by %q", k, e.partitionKey, placed)
		}
	}
}
