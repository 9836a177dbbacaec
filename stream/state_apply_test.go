package stream

import (
	"context"
	"fmt"
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
