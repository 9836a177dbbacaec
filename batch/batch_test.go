package batch

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestBatchAccessors(t *testing.T) {
	blocks := []BlockInfo{
		{ID: BlockID{Source: 0, Seq: 1}, Ranges: []SeqRange{{Stream: "s", Shard: "a", First: "1", Last: "2", Count: 2}}, Count: 2},
		{ID: BlockID{Source: 0, Seq: 2}, Ranges: []SeqRange{{Stream: "s", Shard: "a", First: "3", Last: "3", Count: 1}, {Stream: "s", Shard: "b", First: "1", Last: "1", Count: 1}}, Count: 2},
	}
	b := New(Time(2000), blocks, []string{"x", "y"}, []string{"z", "w"})
	if got, want := b.Len(), 4; got != want {
		t.Errorf("Len() = %d, want %d", got, want)
	}
	if diff := cmp.Diff([]string{"x", "y", "z", "w"}, b.Records()); diff != "" {
		t.Errorf("Records() (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"x", "y", "z", "w"}, slices.Collect(b.All())); diff != "" {
		t.Errorf("All() (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]BlockID{{0, 1}, {0, 2}}, b.BlockIDs()); diff != "" {
		t.Errorf("BlockIDs() (-want +got):\n%s", diff)
	}
	wantRanges := append(slices.Clone(blocks[0].Ranges), blocks[1].Ranges...)
	if diff := cmp.Diff(wantRanges, b.Ranges()); diff != "" {
		t.Errorf("Ranges() (-want +got):\n%s", diff)
	}
	d := Derive(b, []int{1})
	if d.Time() != b.Time() || len(d.Blocks()) != 2 || d.Len() != 1 {
		t.Errorf("Derive kept time %v blocks %d len %d", d.Time(), len(d.Blocks()), d.Len())
	}
	// Stopping an iteration early must not panic or continue.
	n := 0
	for range b.All() {
		n++
		if n == 2 {
			break
		}
	}
	if n != 2 {
		t.Errorf("early break: iterated %d", n)
	}
	// Records of a single-part batch is a copy.
	one := New(Time(0), nil, []int{1, 2})
	r := one.Records()
	r[0] = 9
	if one.Parts()[0][0] != 1 {
		t.Error("Records() aliased the batch's part")
	}
}

func TestTime(t *testing.T) {
	tm := TimeOf(time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.UTC))
	if got := tm.Std(); !got.Equal(time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.UTC)) {
		t.Errorf("Std() = %v", got)
	}
	if got := tm.Add(time.Second).Sub(tm); got != time.Second {
		t.Errorf("Add/Sub = %v", got)
	}
	if got, want := Time(1000).String(), "1000 ms (1970-01-01T00:00:01Z)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestSeqRangeValidate(t *testing.T) {
	ok := SeqRange{Stream: "s", Shard: "shardId-0", First: "9", Last: "10", Count: 2}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid range: %v", err)
	}
	bad := map[string]SeqRange{
		"no stream":    {Shard: "a", First: "1", Last: "1", Count: 1},
		"no shard":     {Stream: "s", First: "1", Last: "1", Count: 1},
		"zero count":   {Stream: "s", Shard: "a", First: "1", Last: "1"},
		"bad first":    {Stream: "s", Shard: "a", First: "x", Last: "1", Count: 1},
		"bad last":     {Stream: "s", Shard: "a", First: "1", Last: "", Count: 1},
		"first > last": {Stream: "s", Shard: "a", First: "10", Last: "9", Count: 1},
	}
	for name, r := range bad {
		if err := r.Validate(); err == nil {
			t.Errorf("%s: Validate() = nil, want an error", name)
		}
	}
}

func TestBlockID(t *testing.T) {
	a, b := BlockID{0, 2}, BlockID{1, 1}
	if a.Compare(b) != -1 || b.Compare(a) != 1 || a.Compare(a) != 0 || (BlockID{0, 1}).Compare(a) != -1 {
		t.Error("Compare order wrong")
	}
	if got := a.String(); got != "block-0-2" {
		t.Errorf("String() = %q", got)
	}
}

// TestKeep: the batch of the records keep keeps has b's time and blocks,
// its parts apart, and the kept records' origins in order; keeping every
// record returns b itself.
func TestKeep(t *testing.T) {
	blocks := []BlockInfo{{ID: BlockID{Seq: 1}, Count: 5}}
	origins := []Origin{{Seq: "10"}, {Seq: "11"}, {Seq: "12"}, {Seq: "13"}, {Seq: "14"}}
	for _, tc := range []struct {
		name    string
		drop    []int
		origins bool
		parts   [][]int
		kept    []Origin
	}{
		{"none", nil, true, [][]int{{0, 1, 2}, {3, 4}}, origins},
		{"some", []int{1, 3}, true, [][]int{{0, 2}, {4}}, []Origin{{Seq: "10"}, {Seq: "12"}, {Seq: "14"}}},
		{"first", []int{0}, true, [][]int{{1, 2}, {3, 4}}, origins[1:]},
		{"a part", []int{3, 4}, true, [][]int{{0, 1, 2}, nil}, origins[:3]},
		{"all", []int{0, 1, 2, 3, 4}, true, [][]int{nil, nil}, []Origin{}},
		{"no origins", []int{2}, false, [][]int{{0, 1}, {3, 4}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := New(Time(7), blocks, []int{0, 1, 2}, []int{3, 4})
			if tc.origins {
				b = b.WithOrigins(origins)
			}
			var seen []int
			got := b.Keep(func(i, v int) bool {
				if i != v {
					t.Errorf("keep(%d, %d): index and record differ", i, v)
				}
				seen = append(seen, i)
				return !slices.Contains(tc.drop, i)
			})
			if diff := cmp.Diff([]int{0, 1, 2, 3, 4}, seen); diff != "" {
				t.Errorf("keep's calls (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.parts, got.Parts(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("parts (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.kept, got.Origins()); diff != "" {
				t.Errorf("origins (-want +got):\n%s", diff)
			}
			if tc.origins != (got.Origins() != nil) {
				t.Errorf("Origins() = %v: want origins %v", got.Origins(), tc.origins)
			}
			if got.Time() != 7 || !cmp.Equal(blocks, got.Blocks()) || got.Len() != 5-len(tc.drop) {
				t.Errorf("time %v, blocks %v, Len %d: want b's time and blocks, %d records", got.Time(), got.Blocks(), got.Len(), 5-len(tc.drop))
			}
			if len(tc.drop) == 0 && got != b {
				t.Errorf("keeping every record: a new batch, want b")
			}
		})
	}
}
