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

// panicCodec is a Codec of ints that panics encoding, or decoding, a value
// of at least 3, or (zero) the zero value Run checks the codec with.
type panicCodec struct{ enc, dec, zero bool }

func (c panicCodec) Encode(vs []int) ([]byte, error) {
	for _, v := range vs {
		if c.enc && v >= 3 || c.zero && v == 0 {
			panic("encode boom")
		}
	}
	return GobCodec[int]().Encode(vs)
}

func (c panicCodec) Decode(b []byte) ([]int, error) {
	vs, err := GobCodec[int]().Decode(b)
	for _, v := range vs {
		if c.dec && v >= 3 {
			panic("decode boom")
		}
	}
	return vs, err
}

// TestCodecPanicFailsRun checks that a state Codec that panics, when Run
// checks it, when a snapshot is taken or when one is restored, makes Run
// return an error naming the panic, as a panic in any user function does,
// instead of crashing the process.
func TestCodecPanicFailsRun(t *testing.T) {
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
	five := [][]string{{"a"}, {"a"}, {"a"}, {"a"}, {"a"}}
	t.Run("check", func(t *testing.T) {
		err := run(t, t.TempDir(), panicCodec{zero: true}, nil)
		if err == nil || !strings.Contains(err.Error(), "panic: encode boom") {
			t.Fatalf("Run = %v, want the codec's panic", err)
		}
	})
	t.Run("snapshot", func(t *testing.T) {
		err := run(t, t.TempDir(), panicCodec{enc: true}, [][]string{{"a", "a", "a"}, {"a"}})
		if err == nil || !strings.Contains(err.Error(), "panic: encode boom") {
			t.Fatalf("Run = %v, want the codec's panic", err)
		}
	})
	t.Run("restore", func(t *testing.T) {
		dir := t.TempDir()
		if err := run(t, dir, panicCodec{}, five); err != nil {
			t.Fatalf("first Run = %v", err)
		}
		err := run(t, dir, panicCodec{dec: true}, nil)
		if err == nil || !strings.Contains(err.Error(), "panic: decode boom") {
			t.Fatalf("second Run = %v, want the codec's panic", err)
		}
	})
}
