package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/recoverylog"
)

// TestMapWithState keeps a count per word, emits the new count of every
// word seen, and times a word out after 2s without it.
func TestMapWithState(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		p, r, s := newTest[string](t, Config{})
		mapped, snaps := MapWithState(wordPairs(s), func(k string, v int, st *State[int]) (string, bool) {
			if st.IsTimingOut() {
				return k + " timed out at " + strings.Repeat("*", st.Get()), true
			}
			st.Update(st.Get() + v)
			return k + "=" + strings.Repeat("*", st.Get()), true
		}, StateTimeout(2*time.Second))
		m := collect(mapped)
		c := collect(snaps)
		if err := feed(t, p, r, [][]string{{"a b", "a"}, {"b"}, nil, {"b"}, nil, {"c"}}); err != nil {
			t.Fatalf("Run: %v", err)
		}
		wantMapped := []out[string]{
			{0, []string{"a=*", "b=*", "a=**"}},
			{1, []string{"b=**"}},
			{2, []string{"a timed out at **"}},
			{3, []string{"b=***"}},
			{4, nil},
			{5, []string{"c=*", "b timed out at ***"}},
		}
		if diff := cmp.Diff(wantMapped, m.outs(), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("mapped (-want +got):\n%s", diff)
		}
		wantSnaps := []out[kv]{
			{0, []kv{{"a", 2}, {"b", 1}}},
			{1, []kv{{"a", 2}, {"b", 2}}},
			{2, []kv{{"b", 2}}},
			{3, []kv{{"b", 3}}},
			{4, []kv{{"b", 3}}},
			{5, []kv{{"c", 1}}},
		}
		if diff := cmp.Diff(wantSnaps, c.outs(), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("state snapshots (-want +got):\n%s", diff)
		}
	})
}

// TestMapWithStateRemove removes states: word "-w" removes the state of
// w. A key removed and given state again within a batch is listed once in
// the snapshots, where it first got state.
func TestMapWithStateRemove(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		p, r, s := newTest[string](t, Config{})
		pairs := Map(FlatMap(s, strings.Fields), func(w string) kv {
			if k, ok := strings.CutPrefix(w, "-"); ok {
				return kv{k, -1}
			}
			return kv{w, 1}
		})
		_, snaps := MapWithState(pairs, func(k string, v int, st *State[int]) (string, bool) {
			if v < 0 {
				st.Remove()
			} else {
				st.Update(st.Get() + v)
			}
			return k, true
		})
		c := collect(snaps)
		if err := feed(t, p, r, [][]string{{"a b -a a"}, {"c"}, {"-b b -c"}, {"d"}}); err != nil {
			t.Fatalf("Run: %v", err)
		}
		want := []out[kv]{
			{0, []kv{{"a", 1}, {"b", 1}}},
			{1, []kv{{"a", 1}, {"b", 1}, {"c", 1}}},
			{2, []kv{{"a", 1}, {"b", 1}}},
			{3, []kv{{"a", 1}, {"b", 1}, {"d", 1}}},
		}
		if diff := cmp.Diff(want, c.outs(), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("state snapshots (-want +got):\n%s", diff)
		}
	})
}

// TestMapWithStateUpdateTimingOut fails the batch of a function that
// updates a state that is timing out.
func TestMapWithStateUpdateTimingOut(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		p, r, s := newTest[string](t, Config{})
		mapped, _ := MapWithState(wordPairs(s), func(_ string, v int, st *State[int]) (int, bool) {
			st.Update(v)
			return 0, false
		}, StateTimeout(time.Second))
		collect(mapped)
		err := feed(t, p, r, [][]string{{"a"}, nil, nil})
		var be *BatchError
		if !errors.As(err, &be) || !strings.Contains(err.Error(), "timing out") {
			t.Fatalf("Run = %v, want a *BatchError about updating a timing-out state", err)
		}
	})
}

type opaque struct{ n int } // no exported field: gob refuses it

type opaqueCodec struct{}

func (opaqueCodec) Encode(vs []opaque) ([]byte, error) {
	b := make([]byte, len(vs))
	for i, v := range vs {
		b[i] = byte(v.n)
	}
	return b, nil
}

func (opaqueCodec) Decode(b []byte) ([]opaque, error) {
	vs := make([]opaque, len(b))
	for i, c := range b {
		vs[i] = opaque{int(c)}
	}
	return vs, nil
}

// TestStateCodecRefusedAtRun checks that Run, with a recovery log, refuses
// a state type its codec cannot encode, naming the operator and the fix;
// that a StateCodec for the type fixes it; and that a codec of a type the
// operator does not keep is refused.
func TestStateCodecRefusedAtRun(t *testing.T) {
	build := func(opts ...Option) error {
		p, err := NewPipeline(Config{Recovery: recoverylog.NewMemory()})
		if err != nil {
			t.Fatal(err)
		}
		s := From(p, newTestReceiver[string]())
		st := UpdateStateByKey(wordPairs(s), func(_ string, vs []int, st opaque, _ bool) (opaque, bool) {
			return opaque{st.n + len(vs)}, true
		}, opts...)
		ForEachBatch(st, func(context.Context, *batch.Batch[Pair[string, opaque]]) error { return nil })
		return p.Validate()
	}
	err := build()
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "UpdateStateByKey (stream") ||
		!strings.Contains(err.Error(), "stream.StateCodec") || !strings.Contains(err.Error(), "opaque") {
		t.Errorf("Validate with an opaque state = %v; want ErrInvalidConfig naming UpdateStateByKey, the type and StateCodec", err)
	}
	if err := build(StateCodec[opaque](opaqueCodec{})); err != nil {
		t.Errorf("Validate with a StateCodec for the state: %v", err)
	}
	err = build(StateCodec[opaque](opaqueCodec{}), StateCodec[float64](GobCodec[float64]()))
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "float64") {
		t.Errorf("Validate with a codec of a type the operator does not keep = %v; want ErrInvalidConfig naming it", err)
	}
	// Without a recovery log the state is never encoded: nothing to refuse.
	p, _ := NewPipeline(Config{})
	s := From(p, newTestReceiver[string]())
	ForEachBatch(UpdateStateByKey(wordPairs(s), func(_ string, _ []int, st opaque, _ bool) (opaque, bool) { return st, true }),
		func(context.Context, *batch.Batch[Pair[string, opaque]]) error { return nil })
	if err := p.Validate(); err != nil {
		t.Errorf("Validate without a recovery log: %v", err)
	}
}

// holder is a state whose zero value gob encodes (a nil interface) but
// whose real values it does not when V holds an unregistered type: the
// start-up check passes, every snapshot fails.
type holder struct{ V any }

// unregistered is never given to gob.Register.
type unregistered struct{ N int }

// TestStateSnapshotEncodeFailureFailsRun checks that a state the start-up
// check could not catch (an interface holding an unregistered type) fails
// Run at the first snapshot, naming the operator, the type and the fix,
// instead of failing every snapshot while Run goes on without crash
// recovery.
func TestStateSnapshotEncodeFailureFailsRun(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		p, r, s := newTest[string](t, Config{Recovery: recoverylog.NewMemory(), Logger: slog.New(slog.DiscardHandler)})
		st := UpdateStateByKey(wordPairs(s), func(_ string, vs []int, st holder, _ bool) (holder, bool) {
			n := 0
			if u, ok := st.V.(unregistered); ok {
				n = u.N
			}
			return holder{V: unregistered{N: n + len(vs)}}, true
		})
		ForEachBatch(st, func(context.Context, *batch.Batch[Pair[string, holder]]) error { return nil })
		// Records in every batch: the snapshots of an idle pipeline come
		// once a minute.
		err := feed(t, p, r, [][]string{{"a b"}, {"c"}, {"c"}, {"c"}, {"c"}, {"c"}, {"c"}, {"c"}, {"c"}, {"c"}, {"c"}})
		if err == nil {
			t.Fatal("Run returned nil: the state went unprotected without an error")
		}
		for _, want := range []string{"UpdateStateByKey", "stream.holder", "gob.Register", "stream.StateCodec"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("Run = %v; want it to name %q", err, want)
			}
		}
	})
}

// panicky is a user codec with a bug: it panics on a value above limit.
type panicky struct{ limit int }

func (c *panicky) Encode(vs []int) ([]byte, error) {
	for _, v := range vs {
		if v > c.limit {
			panic(fmt.Sprintf("panicky: %d", v))
		}
	}
	return GobCodec[int]().Encode(vs)
}

func (c *panicky) Decode(b []byte) ([]int, error) { return GobCodec[int]().Decode(b) }

// TestPanickingCodec checks that a user codec that panics is an error,
// never a crash: at the start-up check (Validate and Run refuse the
// pipeline, naming the operator and the panic), and at a snapshot (Run
// fails naming the operator), as a panicking operator function fails its
// batch. Both crashed the process.
func TestPanickingCodec(t *testing.T) {
	count := func(_ string, vs []int, st int, _ bool) (int, bool) { return st + len(vs), true }
	t.Run("at the start-up check", func(t *testing.T) {
		p, err := NewPipeline(Config{Recovery: recoverylog.NewMemory()})
		if err != nil {
			t.Fatal(err)
		}
		st := UpdateStateByKey(wordPairs(From(p, newTestReceiver[string]())), count, StateCodec[int](&panicky{limit: -1}))
		ForEachBatch(st, func(context.Context, *batch.Batch[Pair[string, int]]) error { return nil })
		err = p.Validate()
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "UpdateStateByKey (stream") ||
			!strings.Contains(err.Error(), "*stream.panicky in Encode: panic: ") {
			t.Errorf("Validate = %v; want ErrInvalidConfig naming UpdateStateByKey and the codec's panic", err)
		}
	})
	t.Run("at a snapshot", func(t *testing.T) {
		inBubble(t, func(t *testing.T) {
			p, r, s := newTest[string](t, Config{Recovery: recoverylog.NewMemory(), Logger: slog.New(slog.DiscardHandler),
				StateSnapshotInterval: time.Second})
			st := UpdateStateByKey(wordPairs(s), count, StateCodec[int](&panicky{limit: 2}))
			ForEachBatch(st, func(context.Context, *batch.Batch[Pair[string, int]]) error { return nil })
			err := feed(t, p, r, [][]string{{"a"}, {"a a"}})
			if err == nil || !strings.Contains(err.Error(), "UpdateStateByKey") || !strings.Contains(err.Error(), "panicky: 3") {
				t.Errorf("Run = %v; want an error naming UpdateStateByKey and the codec's panic", err)
			}
		})
	})
}

// TestStateSnapshotRoundTrip snapshots and restores each stateful
// operator's state, with the default and a user codec, including struct
// keys that JSON could not use as map keys.
func TestStateSnapshotRoundTrip(t *testing.T) {
	type key struct {
		Shard string
		N     int
	}
	st := newKeyState[key, int, opaque](nil, GobCodec[key](), opaqueCodec{})
	for i := range 5 {
		st.hold(key{"s", 4 - i}, opaque{i})
	}
	data, err := st.snapshot()
	if err != nil {
		t.Fatal(err)
	}
	back := newKeyState[key, int, opaque](nil, GobCodec[key](), opaqueCodec{})
	if err := back.restore(data); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(st.held.pairs, back.held.pairs, cmp.AllowUnexported(opaque{})); diff != "" {
		t.Errorf("states (-want +got):\n%s", diff)
	}
	if err := back.restore(data[:len(data)-1]); err == nil {
		t.Errorf("restore of a cut snapshot: no error")
	}
}

// TestGobCodecValues round-trips the values the default codec must take:
// nil and non-nil pointers, nil interfaces, struct keys, maps, empty
// structs; and refuses a channel.
func TestGobCodecValues(t *testing.T) {
	one := 1
	roundTrip(t, GobCodec[*int](), []*int{nil, &one, nil})
	roundTrip(t, GobCodec[any](), []any{nil, "x", 3})
	type key struct {
		Shard string
		N     int
	}
	roundTrip(t, GobCodec[key](), []key{{"a", 1}, {}, {"b", 2}})
	roundTrip(t, GobCodec[map[key]int](), []map[key]int{{{"a", 1}: 2}, {}})
	roundTrip(t, GobCodec[struct{}](), []struct{}{{}, {}})
	roundTrip(t, JSONCodec[map[string]int](), []map[string]int{{"a": 1}, {}})
	if err := checkCodec(GobCodec[chan int]()); err == nil || !strings.Contains(err.Error(), "chan int") {
		t.Errorf("checkCodec of a channel type = %v; want an error naming the type", err)
	}
	if err := checkCodec(GobCodec[*opaque]()); err == nil {
		t.Errorf("checkCodec of a pointer to a struct without exported fields: no error")
	}
}

func roundTrip[T any](t *testing.T, c Codec[T], vs []T) {
	t.Helper()
	if err := checkCodec(c); err != nil {
		t.Fatalf("checkCodec: %v", err)
	}
	b, err := c.Encode(vs)
	if err != nil {
		t.Fatalf("Encode(%v): %v", vs, err)
	}
	back, err := c.Decode(b)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if diff := cmp.Diff(vs, back, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("round trip of %T (-want +got):\n%s", vs, diff)
	}
}
