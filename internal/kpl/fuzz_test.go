package kpl

import (
	"bytes"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzDeaggregate checks that Deaggregate never panics and keeps its
// contract on any input. Random mutations almost never keep the MD5 digest
// right, so each input is also framed as a protobuf message with a correct
// digest: that is what lets the fuzzer explore the decoder.
func FuzzDeaggregate(f *testing.F) {
	f.Add(golden)
	f.Add(golden[len(magic) : len(golden)-digestLen])
	f.Add(Aggregate(truncationInput()))
	for _, r := range [][]UserRecord{nil, truncationInput(), {{PartitionKey: "k", ExplicitHashKey: "7", Data: []byte("v")}}} {
		full := Aggregate(r)
		f.Add(full[len(magic) : len(full)-digestLen])
	}
	f.Add(pb(sfield(1, "pk"), bfield(3, pb(vfield(1, 0), bfield(4, pb(sfield(1, "k"), sfield(2, "v"))), sfield(3, "d")))))
	f.Add(pb(group(9, vfield(1, 1), group(2)), fixed64field(10, 1), fixed32field(11, 1), sfield(1, "pk")))
	f.Add([]byte("not an aggregate"))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDeaggregate(t, data)
		checkDeaggregate(t, frame(data))
	})
}

// checkDeaggregate checks Deaggregate's contract on data: a pass-through
// (with a *FormatError only for data that starts with the magic number, and
// neither for data MaybeAggregate rules out), or records that survive a
// second round trip through Aggregate unchanged.
func checkDeaggregate(t *testing.T, data []byte) {
	recs, aggregated, err := Deaggregate(data, "outer")
	if !MaybeAggregate(data) && (aggregated || err != nil) {
		t.Fatalf("MaybeAggregate false, but Deaggregate says aggregated %v, error %v", aggregated, err)
	}
	if !aggregated {
		if len(recs) != 1 || recs[0].PartitionKey != "outer" || !bytes.Equal(recs[0].Data, data) || recs[0].SubSequence != 0 {
			t.Fatalf("not aggregated, but records are not the input passed through: %+v", recs)
		}
		var fe *FormatError
		if err != nil && (!errors.As(err, &fe) || !bytes.HasPrefix(data, []byte(magic))) {
			t.Fatalf("error %v (%T) for data that does not start with the magic number, or not a *FormatError", err, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("aggregated with error %v", err)
	}
	again, aggregated, err := Deaggregate(Aggregate(recs), "other")
	if err != nil || !aggregated {
		t.Fatalf("re-aggregated records: aggregated %v, error %v; want true, nil", aggregated, err)
	}
	if diff := cmp.Diff(recs, again, equateEmpty); diff != "" {
		t.Fatalf("records changed through Aggregate and Deaggregate (-first +second):\n%s", diff)
	}
}
