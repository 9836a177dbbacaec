package stream

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestShuffleMatchesOneLoop runs the shuffle of ReduceByKey on random
// batches, one keyed operator for all of them as in a run, and checks each
// result against one loop over the batch: one pair per key, in the order
// keys first appear, with the values of a key combined partition by
// partition and in order within one (the reduce, concatenation, is not
// commutative, so any other order shows). Batches change their number of
// partitions and keys, so tasks and indexes kept from a batch are used for
// one of another shape. Each runs with the reduce side in the last map
// task (a small one, as these batches are) and as a stage of its own.
func TestShuffleMatchesOneLoop(t *testing.T) {
	for _, c := range []struct {
		par   int
		apart bool
	}{{1, false}, {2, false}, {3, false}, {7, false}, {2, true}, {3, true}, {7, true}} {
		t.Run(fmt.Sprintf("Parallelism %d reduce apart %v", c.par, c.apart), func(t *testing.T) {
			par := c.par
			rng := rand.New(rand.NewPCG(uint64(par), 1))
			kd := reduceByKey[string](func(a, b string) string { return a + "," + b })
			kd.reduceApart = c.apart
			for b := range 60 {
				in, want := randomKeyedBatch(rng, b)
				got, err := kd.shuffle(context.Background(), par, in)
				if err != nil {
					t.Fatalf("batch %d: %v", b, err)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Fatalf("batch %d of %d partitions (-want +got):\n%s", b, len(in.keys), diff)
				}
			}
		})
	}
}

// randomKeyedBatch returns a batch of up to 6 partitions whose chunks
// interleave by position, of keys drawn from a vocabulary whose size
// changes with b, and the result of reducing it in one loop: values are
// record names, combined by concatenation.
func randomKeyedBatch(rng *rand.Rand, b int) (*parted[Pair[string, string]], []Pair[string, string]) {
	n := rng.IntN(7) // no partition at all, sometimes
	vocab := []int{1, 3, 40, 700}[b%4]
	data := make([][]chunk[Pair[string, string]], n)
	npos := 0
	if n > 0 {
		npos = rng.IntN(12) + 1
	}
	var batchOrder []Pair[string, string] // the batch as ForEachBatch sees it
	for pos := range npos {
		part := rng.IntN(n)
		recs := make([]Pair[string, string], rng.IntN(300))
		for i := range recs {
			recs[i] = Pair[string, string]{Key: fmt.Sprintf("k%d", rng.IntN(vocab)), Value: fmt.Sprintf("p%d.%d.%d", part, pos, i)}
		}
		data[part] = append(data[part], chunk[Pair[string, string]]{pos, recs})
		batchOrder = append(batchOrder, recs...)
	}
	// Values combine partition by partition; keys come in batch order.
	index := make(map[string]int)
	var want []Pair[string, string]
	for _, kv := range batchOrder {
		if _, ok := index[kv.Key]; !ok {
			index[kv.Key] = len(want)
			want = append(want, Pair[string, string]{Key: kv.Key})
		}
	}
	for _, d := range data {
		for _, c := range d {
			for _, kv := range c.recs {
				w := &want[index[kv.Key]]
				if w.Value == "" {
					w.Value = kv.Value
				} else {
					w.Value += "," + kv.Value
				}
			}
		}
	}
	keys := make([]partKey, n)
	for i := range keys {
		keys[i] = partKey{stream: "s", shard: fmt.Sprint(i)}
	}
	return computed(0, nil, keys, npos, data), want
}
