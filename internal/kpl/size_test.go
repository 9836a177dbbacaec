package kpl

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestAggregateSizeOneKey checks AggregateBase and UserRecordSize against
// what Aggregate writes, across the lengths where varints grow.
func TestAggregateSizeOneKey(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	lens := []int{0, 1, 126, 127, 128, 16383, 16384, 300000}
	for _, keyLen := range []int{1, 127, 128, 256} {
		key := strings.Repeat("k", keyLen)
		for trial := range 20 {
			var recs []UserRecord
			want := AggregateBase(keyLen)
			for range 1 + trial%5 {
				n := lens[rng.IntN(len(lens))]
				recs = append(recs, UserRecord{PartitionKey: key, Data: make([]byte, n)})
				want += UserRecordSize(n)
			}
			if got := len(Aggregate(recs)); got != want {
				t.Fatalf("key of %d bytes, %d records: Aggregate wrote %d bytes, the sizes say %d", keyLen, len(recs), got, want)
			}
		}
	}
}
