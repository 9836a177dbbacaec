package kpl

import (
	"fmt"
	"testing"
)

// benchRecords returns n user records of size bytes each, over 10
// partition keys.
func benchRecords(n, size int) []UserRecord {
	recs := make([]UserRecord, n)
	for i := range recs {
		data := make([]byte, size)
		for j := range data {
			data[j] = byte(i + j)
		}
		recs[i] = UserRecord{PartitionKey: fmt.Sprintf("partition-%d", i%10), Data: data}
	}
	return recs
}

func BenchmarkDeaggregate(b *testing.B) {
	for _, bc := range []struct{ n, size int }{{100, 100}, {1000, 1000}} {
		data := Aggregate(benchRecords(bc.n, bc.size))
		b.Run(fmt.Sprintf("records=%d/size=%d", bc.n, bc.size), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := Deaggregate(data, "pk"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDeaggregatePlain is the baseline: a record that is not an
// aggregate, which every consumer pays for on every record.
func BenchmarkDeaggregatePlain(b *testing.B) {
	data := make([]byte, 100)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Deaggregate(data, "pk"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAggregate(b *testing.B) {
	recs := benchRecords(100, 100)
	b.SetBytes(int64(len(Aggregate(recs))))
	b.ReportAllocs()
	for b.Loop() {
		Aggregate(recs)
	}
}
