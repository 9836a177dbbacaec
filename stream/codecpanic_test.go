package stream

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/recovery"
)

// panicCodec is a Codec of ints that panics (dec) decoding a value of at
// least 3.
type panicCodec struct{ dec bool }

func (c panicCodec) Encode(vs []int) ([]byte, error) { return GobCodec[int]().Encode(vs) }

func (c panicCodec) Decode(b []byte) ([]int, error) {
	vs, err := GobCodec[int]().Decode(b)
	for _, v := range vs {
		if c.dec && v >= 3 {
			panic("decode boom")
		}
	}
	return vs, err
}

// TestCodecPanicAtRestoreFailsRun checks that a state Codec that panics
// when a snapshot is restored makes Run return an error naming the panic
// instead of crashing the process (TestPanickingCodec checks the start-up
// check and a snapshot).
func TestCodecPanicAtRestoreFailsRun(t *testing.T) {
	run := func(t *testing.T, dir string, c panicCodec, steps [][]string) error {
		var err error
		synctest.Test(t, func(t *testing.T) {
			p, r, s := newTest[string](t, Config{Recovery: recovery.Dir(dir), StateSnapshotInterval: time.Second})
			pairs := Map(s, func(v string) Pair[string, int] { return Pair[string, int]{v, 1} })
			counts := UpdateStateByKey(pairs, func(_ string, vs []int, n int, _ bool) (int, bool) { return n + len(vs), true },
				StateCodec[int](c))
			ForEachBatch(counts, func(context.Context, *batch.Batch[Pair[string, int]]) error { return nil })
			err = feed(t, p, r, steps)
		})
		return err
	}
	dir := t.TempDir()
	if err := run(t, dir, panicCodec{}, [][]string{{"a"}, {"a"}, {"a"}, {"a"}, {"a"}}); err != nil {
		t.Fatalf("first Run = %v", err)
	}
	err := run(t, dir, panicCodec{dec: true}, nil)
	if err == nil || !strings.Contains(err.Error(), "in Decode: panic: decode boom") {
		t.Fatalf("second Run = %v, want the codec's panic", err)
	}
}
