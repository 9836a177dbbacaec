package shardstate

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/weirstream/weir/internal/dynamochunk"
)

// testData returns n bytes that differ from those of another seed.
func testData(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) ^ seed
	}
	return b
}

func pos(seq string, sub int64) Position { return Position{Sequence: seq, SubSequence: sub} }

// conformance runs the cases every Store must pass; newStore returns an
// empty store (or one whose keys no other case uses).
func conformance(t *testing.T, newStore func(t *testing.T) Store) {
	key := func(t *testing.T) Key { return Key{Application: "app", Stream: "s", Shard: t.Name(), Shape: "v1"} }

	t.Run("RoundTrip", func(t *testing.T) {
		for _, n := range []int{0, 1, 1000, dynamochunk.Size, 2*dynamochunk.Size + 5} {
			t.Run(fmt.Sprint(n), func(t *testing.T) {
				s, k := newStore(t), key(t)
				want := Snapshot{Data: testData(n, 1), Position: pos("49590338271490256608559692538361571095921575989136588898", 3), Lease: Lease{Counter: 7, Owner: "w1"}}
				if err := s.Put(t.Context(), k, want); err != nil {
					t.Fatal(err)
				}
				got, err := s.Get(t.Context(), k)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got.Data, want.Data) || got.Position != want.Position || got.Lease != want.Lease {
					t.Fatalf("Get: %d bytes at %v by %v; want %d bytes at %v by %v", len(got.Data), got.Position, got.Lease, len(want.Data), want.Position, want.Lease)
				}
			})
		}
	})

	t.Run("Replace", func(t *testing.T) {
		s, k := newStore(t), key(t)
		for i, n := range []int{2*dynamochunk.Size + 5, 10, dynamochunk.Size + 1} {
			want := Snapshot{Data: testData(n, byte(i)), Position: pos(fmt.Sprint(100+i), 0), Lease: Lease{Counter: 1, Owner: "w"}}
			if err := s.Put(t.Context(), k, want); err != nil {
				t.Fatal(err)
			}
			got, err := s.Get(t.Context(), k)
			if err != nil || !bytes.Equal(got.Data, want.Data) || got.Position != want.Position {
				t.Fatalf("Put %d: Get: %d bytes at %v, %v; want %d bytes at %v", i, len(got.Data), got.Position, err, n, want.Position)
			}
		}
	})

	t.Run("None", func(t *testing.T) {
		s, k := newStore(t), key(t)
		if _, err := s.Get(t.Context(), k); !errors.Is(err, ErrNoSnapshot) {
			t.Fatalf("Get of a new shard: %v, want ErrNoSnapshot", err)
		}
		if err := s.Claim(t.Context(), k, Lease{Counter: 3, Owner: "w"}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(t.Context(), k); !errors.Is(err, ErrNoSnapshot) {
			t.Fatalf("Get of a claimed shard: %v, want ErrNoSnapshot", err)
		}
	})

	t.Run("CounterZero", func(t *testing.T) {
		s, k := newStore(t), key(t)
		if err := s.Claim(t.Context(), k, Lease{Counter: 0, Owner: "w"}); err != nil {
			t.Fatalf("Claim at counter 0 of a new shard: %v", err)
		}
		k.Shard += "-2"
		if err := s.Put(t.Context(), k, Snapshot{Data: []byte("x"), Lease: Lease{Counter: 0, Owner: "w"}}); err != nil {
			t.Fatalf("Put at counter 0 to a new shard: %v", err)
		}
	})

	t.Run("ShapeChanged", func(t *testing.T) {
		s, k := newStore(t), key(t)
		if err := s.Put(t.Context(), k, Snapshot{Data: []byte("x"), Lease: Lease{Counter: 1, Owner: "w"}}); err != nil {
			t.Fatal(err)
		}
		k.Shape = "v2"
		if _, err := s.Get(t.Context(), k); !errors.Is(err, ErrShapeChanged) {
			t.Fatalf("Get under another shape: %v, want ErrShapeChanged", err)
		}
	})

	t.Run("Fencing", func(t *testing.T) {
		s, k := newStore(t), key(t)
		put := func(c int64, o, seq string) error {
			return s.Put(t.Context(), k, Snapshot{Data: []byte(o + seq), Position: pos(seq, 0), Lease: Lease{Counter: c, Owner: o}})
		}
		steps := []struct {
			what    string
			do      func() error
			fenced  bool
			current string // Data of the snapshot Get then returns
		}{
			{"first put", func() error { return put(5, "a", "100") }, false, "a100"},
			{"same lease, later position", func() error { return put(5, "a", "200") }, false, "a200"},
			{"same lease, same position (a retry)", func() error { return put(5, "a", "200") }, false, "a200"},
			{"same lease, earlier position", func() error { return put(5, "a", "99") }, true, "a200"},
			{"lower counter (a zombie)", func() error { return put(4, "z", "900") }, true, "a200"},
			{"same counter, another owner", func() error { return put(5, "b", "900") }, true, "a200"},
			{"successor claims", func() error { return s.Claim(t.Context(), k, Lease{Counter: 6, Owner: "b"}) }, false, "a200"},
			{"claim again (a retry)", func() error { return s.Claim(t.Context(), k, Lease{Counter: 6, Owner: "b"}) }, false, "a200"},
			{"predecessor after the claim", func() error { return put(5, "a", "300") }, true, "a200"},
			{"predecessor claims back", func() error { return s.Claim(t.Context(), k, Lease{Counter: 5, Owner: "a"}) }, true, "a200"},
			{"successor puts, earlier position", func() error { return put(6, "b", "150") }, false, "b150"},
			{"successor renewed", func() error { return put(9, "b", "160") }, false, "b160"},
		}
		for _, st := range steps {
			err := st.do()
			if st.fenced != errors.Is(err, ErrFenced) || (!st.fenced && err != nil) {
				t.Fatalf("%s: %v; want fenced %v", st.what, err, st.fenced)
			}
			got, err := s.Get(t.Context(), k)
			if err != nil || string(got.Data) != st.current {
				t.Fatalf("%s: Get: %q, %v; want %q", st.what, got.Data, err, st.current)
			}
		}
	})

	t.Run("Invalid", func(t *testing.T) {
		s, k := newStore(t), key(t)
		for _, c := range []struct {
			what string
			k    Key
			snap Snapshot
		}{
			{"no shard", Key{Application: "a", Stream: "s"}, Snapshot{Lease: Lease{Owner: "w"}}},
			{"no owner", k, Snapshot{}},
			{"negative counter", k, Snapshot{Lease: Lease{Counter: -1, Owner: "w"}}},
			{"sequence not decimal", k, Snapshot{Position: pos("12a", 0), Lease: Lease{Owner: "w"}}},
			{"sub-sequence alone", k, Snapshot{Position: pos("", 2), Lease: Lease{Owner: "w"}}},
		} {
			if err := s.Put(t.Context(), c.k, c.snap); !errors.Is(err, ErrInvalid) {
				t.Errorf("Put with %s: %v, want ErrInvalid", c.what, err)
			}
		}
	})
}

func TestMemory(t *testing.T) {
	conformance(t, func(*testing.T) Store { return &Memory{} })
}

func TestPositionOrder(t *testing.T) {
	ps := []Position{{}, pos("9", 0), pos("9", 1), pos("10", 0), pos("340282366920938463463374607431768211455", 0),
		pos("49590338271490256608559692538361571095921575989136588898", 0), pos("1"+strings.Repeat("0", 128), 0)}
	for i := 1; i < len(ps); i++ {
		if ps[i-1].order() >= ps[i].order() {
			t.Errorf("order(%v) = %q, not before order(%v) = %q", ps[i-1], ps[i-1].order(), ps[i], ps[i].order())
		}
	}
}
