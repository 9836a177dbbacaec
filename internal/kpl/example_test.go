package kpl_test

import (
	"errors"
	"fmt"

	"github.com/weirstream/weir/internal/kpl"
)

func ExampleDeaggregate() {
	data := kpl.Aggregate([]kpl.UserRecord{
		{PartitionKey: "user-1", Data: []byte("login")},
		{PartitionKey: "user-2", Data: []byte("click")},
		{PartitionKey: "user-1", Data: []byte("logout")},
	})

	recs, aggregated, err := kpl.Deaggregate(data, "user-1")
	fmt.Println("aggregated:", aggregated, "error:", err)
	for _, r := range recs {
		fmt.Printf("%d %s %s\n", r.SubSequence, r.PartitionKey, r.Data)
	}
	// Output:
	// aggregated: true error: <nil>
	// 0 user-1 login
	// 1 user-2 click
	// 2 user-1 logout
}

func ExampleDeaggregate_notAggregated() {
	recs, aggregated, err := kpl.Deaggregate([]byte("plain record"), "pk")
	fmt.Println(aggregated, err, len(recs), recs[0].PartitionKey, string(recs[0].Data))
	// Output:
	// false <nil> 1 pk plain record
}

func ExampleFormatError() {
	data := kpl.Aggregate([]kpl.UserRecord{{PartitionKey: "pk", Data: []byte("payload")}})
	data[len(data)-1] ^= 0xFF // damage the digest

	recs, aggregated, err := kpl.Deaggregate(data, "pk")
	var fe *kpl.FormatError
	fmt.Println(aggregated, errors.As(err, &fe), errors.Is(err, kpl.ErrDigestMismatch), fe.Offset)
	fmt.Println(len(recs), len(recs[0].Data) == len(data)) // passed through as it is
	// Output:
	// false true true 21
	// 1 true
}
