package stream

import (
	"context"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"hash/maphash"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestUpdateStateByKeyMatchesOneLoop applies random batches, whose
// partitions interleave by position, to one UpdateStateByKey state, as in
// a run, and checks every batch against one loop over the batch as
// ForEachBatch sees it: keys with state first, in the order they got it,
// then new keys in the order they first appear; each key's values in batch
// order. The state is the concatenation of a key's values, and a key whose
// state grows past a length, or that gets no value, loses it, so keys come
// and go and the state's index is rebuilt.
func TestUpdateStateByKeyMatchesOneLoop(t *testing.T) {
	update := func(_ string, vs []string, st string, exists bool) (string, bool) {
		if exists && len(vs) == 0 {
			return "", false
		}
		st += "|" + strings.Join(vs, ",")
		return st, len(st) < 120
	}
	for _, par := range []int{1, 2, 3} {
		t.Run(fmt.Sprintf("Parallelism %d", par), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(par), 2))
			st := newKeyState[string, string, string](update, GobCodec[string](), GobCodec[string]())
			var keys []string // the loop's state: keys in order, states by key
			states := make(map[string]string)
			for b := range 60 {
				in, _ := randomKeyedBatch(rng, b)
				// The loop: the batch's values by key, in batch order.
				vals := make(map[string][]string)
				var news []string
				for kv := range in.batch().All() {
					if _, ok := vals[kv.Key]; !ok {
						if _, held := states[kv.Key]; !held {
							news = append(news, kv.Key)
						}
					}
					vals[kv.Key] = append(vals[kv.Key], kv.Value)
				}
				var want []Pair[string, string]
				kept := keys[:0:0]
				for _, k := range keys {
					if s, keep := update(k, vals[k], states[k], true); keep {
						states[k] = s
						kept = append(kept, k)
						want = append(want, Pair[string, string]{k, s})
					} else {
						delete(states, k)
					}
				}
				keys = kept
				for _, k := range news {
					if s, keep := update(k, vals[k], "", false); keep {
						states[k] = s
						keys = append(keys, k)
						want = append(want, Pair[string, string]{k, s})
					}
				}
				if err := st.apply(context.Background(), par, in); err != nil {
					t.Fatalf("batch %d: %v", b, err)
				}
				if diff := cmp.Diff(want, st.last.Records(), cmpopts.EquateEmpty()); diff != "" {
					t.Fatalf("batch %d of %d partitions (-want +got):\n%s", b, len(in.keys), diff)
				}
				if diff := cmp.Diff(keys, st.keyList(), cmpopts.EquateEmpty()); diff != "" {
					t.Fatalf("batch %d: keys (-want +got):\n%s", b, diff)
				}
			}
		})
	}
}

// TestUpdateStateByKeyValuesMemory checks the memory of update's values:
// used again batch after batch when the state holds no pointer (a hash of
// the values here, checked against one loop's), fresh when the state may
// hold one, so that a state keeping its values stays as it was (each key's
// values of its last batch with values here).
func TestUpdateStateByKeyValuesMemory(t *testing.T) {
	// byKey is the batch's values of each key, in batch order.
	byKey := func(in *parted[Pair[string, string]]) map[string][]string {
		vals := make(map[string][]string)
		for kv := range in.batch().All() {
			vals[kv.Key] = append(vals[kv.Key], kv.Value)
		}
		return vals
	}
	t.Run("state without pointers", func(t *testing.T) {
		hash := func(vs []string, s uint64) uint64 {
			h := fnv.New64a()
			fmt.Fprint(h, s, vs)
			return h.Sum64()
		}
		var first, last *string // where the batch's first values are, and the last batch's
		reused := 0
		update := func(_ string, vs []string, s uint64, _ bool) (uint64, bool) {
			if len(vs) > 0 && first == nil {
				first = &vs[0]
			}
			return hash(vs, s), true
		}
		rng := rand.New(rand.NewPCG(4, 2))
		st := newKeyState[string, string, uint64](update, GobCodec[string](), GobCodec[uint64]())
		states := make(map[string]uint64)
		for b := range 60 {
			in, _ := randomKeyedBatch(rng, b)
			vals := byKey(in)
			for k, s := range states {
				if _, ok := vals[k]; !ok {
					states[k] = hash(nil, s)
				}
			}
			for k, vs := range vals {
				states[k] = hash(vs, states[k])
			}
			first = nil
			if err := st.apply(context.Background(), 2, in); err != nil {
				t.Fatalf("batch %d: %v", b, err)
			}
			got := make(map[string]uint64)
			for kv := range st.last.All() {
				got[kv.Key] = kv.Value
			}
			if diff := cmp.Diff(states, got, cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("batch %d: states (-want +got):\n%s", b, diff)
			}
			if first != nil {
				if first == last {
					reused++
				}
				last = first
			}
		}
		if reused == 0 {
			t.Error("no batch's values were in the memory of the batch before")
		}
	})
	t.Run("state that keeps its values", func(t *testing.T) {
		update := func(_ string, vs []string, s []string, _ bool) ([]string, bool) {
			if len(vs) == 0 {
				return s, true
			}
			return vs, true
		}
		rng := rand.New(rand.NewPCG(4, 3))
		st := newKeyState[string, string, []string](update, GobCodec[string](), GobCodec[[]string]())
		states := make(map[string][]string)
		for b := range 60 {
			in, _ := randomKeyedBatch(rng, b)
			for k, vs := range byKey(in) {
				states[k] = vs
			}
			if err := st.apply(context.Background(), 2, in); err != nil {
				t.Fatalf("batch %d: %v", b, err)
			}
			got := make(map[string][]string)
			for kv := range st.last.All() {
				got[kv.Key] = kv.Value
			}
			if diff := cmp.Diff(states, got, cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("batch %d: states (-want +got):\n%s", b, diff)
			}
		}
	})
}

// TestMapWithStateMatchesOneLoop is TestUpdateStateByKeyMatchesOneLoop for
// MapWithState: f runs record by record in batch order, and a key's state
// is removed, and sometimes given again, within a batch, so the states the
// map tasks found before the batch are stale for later records.
func TestMapWithStateMatchesOneLoop(t *testing.T) {
	// f appends the value to the state; a value ending in 7 removes it,
	// one ending in 3 starts it anew.
	f := func(k, v string, st *State[string]) (string, bool) {
		switch {
		case strings.HasSuffix(v, "7"):
			st.Remove()
			return "", false
		case strings.HasSuffix(v, "3"):
			st.Update(v)
		default:
			st.Update(st.Get() + "," + v)
		}
		return k + "=" + st.Get(), true
	}
	for _, par := range []int{1, 2, 3} {
		t.Run(fmt.Sprintf("Parallelism %d", par), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(par), 3))
			st := &mapState[string, string, string, string]{f: f, vals: make(map[string]*keyEntry[string]),
				kc: GobCodec[string](), sc: GobCodec[string]()}
			var keys []string // the loop's state: keys in order, states by key
			states := make(map[string]string)
			for b := range 60 {
				in, _ := randomKeyedBatch(rng, b)
				var want []string
				for kv := range in.batch().All() {
					s, ok := states[kv.Key]
					state := State[string]{value: s, exists: ok}
					if u, emit := f(kv.Key, kv.Value, &state); emit {
						want = append(want, u)
					}
					switch {
					case !state.exists:
						delete(states, kv.Key)
					case !ok:
						if !slices.Contains(keys, kv.Key) {
							keys = append(keys, kv.Key)
						}
						fallthrough
					default:
						states[kv.Key] = state.value
					}
				}
				keys = slices.DeleteFunc(keys, func(k string) bool { _, ok := states[k]; return !ok })
				if err := st.apply(context.Background(), par, in); err != nil {
					t.Fatalf("batch %d: %v", b, err)
				}
				if diff := cmp.Diff(want, st.out.Records(), cmpopts.EquateEmpty()); diff != "" {
					t.Fatalf("batch %d of %d partitions (-want +got):\n%s", b, len(in.keys), diff)
				}
				if diff := cmp.Diff(keys, st.keyList(), cmpopts.EquateEmpty()); diff != "" {
					t.Fatalf("batch %d: keys (-want +got):\n%s", b, diff)
				}
			}
		})
	}
}

// TestStateSnapshotOfV040Restores restores snapshots that weir v0.4.0
// wrote (its keyState and mapState encodings, taken from that release's
// code) in the current code, and checks that the state is the one they
// held, in order, and that its snapshot restores the same.
func TestStateSnapshotOfV040Restores(t *testing.T) {
	// v0.4.0's keyState with keys b, a, c and states 10, 20, 30.
	const keyed = "03420dff81020102ff820001ff800000227f0301010f676f624974656d5b737472696e675d01ff80000101010156010c00000010ff8200030101620001016100010163003f0dff85020102ff860001ff84000022ff830301010e676f624974656d5b696e7436345d01ff8400010101015601040000000dff860003011400012800013c00"
	// v0.4.0's mapState with keys y, x, states 5, 6, last values at 1000.
	const mapped = "02d00fd00f3e0dff81020102ff820001ff800000227f0301010f676f624974656d5b737472696e675d01ff80000101010156010c0000000cff82000201017900010178003c0dff85020102ff860001ff84000022ff830301010e676f624974656d5b696e7436345d01ff8400010101015601040000000aff860002010a00010c00"
	decode := func(s string) []byte {
		b, err := hex.DecodeString(s)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	st := newKeyState[string, int, int64](nil, GobCodec[string](), GobCodec[int64]())
	st.hold("old", 1) // replaced by the restore
	if err := st.restore(decode(keyed)); err != nil {
		t.Fatalf("restore v0.4.0 UpdateStateByKey snapshot: %v", err)
	}
	want := []Pair[string, int64]{{"b", 10}, {"a", 20}, {"c", 30}}
	if diff := cmp.Diff(want, st.held.pairs); diff != "" {
		t.Errorf("UpdateStateByKey state (-want +got):\n%s", diff)
	}
	data, err := st.snapshot()
	if err != nil {
		t.Fatal(err)
	}
	back := newKeyState[string, int, int64](nil, GobCodec[string](), GobCodec[int64]())
	if err := back.restore(data); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, back.held.pairs); diff != "" {
		t.Errorf("UpdateStateByKey state snapshotted again (-want +got):\n%s", diff)
	}
	for _, k := range []string{"b", "a", "c"} {
		if i, _ := back.held.find(k, maphash.Comparable(back.held.seed, k)); i < 0 {
			t.Errorf("key %q restored but not indexed", k)
		}
	}

	ms := &mapState[string, int, int64, int]{vals: make(map[string]*keyEntry[int64]), kc: GobCodec[string](), sc: GobCodec[int64]()}
	if err := ms.restore(decode(mapped)); err != nil {
		t.Fatalf("restore v0.4.0 MapWithState snapshot: %v", err)
	}
	if diff := cmp.Diff([]string{"y", "x"}, ms.keyList()); diff != "" {
		t.Errorf("MapWithState keys (-want +got):\n%s", diff)
	}
	for k, want := range map[string]keyEntry[int64]{"y": {v: 5, last: 1000}, "x": {v: 6, last: 1000}} {
		if e := ms.vals[k]; e == nil || *e != want {
			t.Errorf("MapWithState state of %q = %+v, want %+v", k, e, want)
		}
	}
}
