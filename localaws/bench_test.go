package localaws

import "testing"

// BenchmarkStart measures Start plus Close of each server on its own.
func BenchmarkStart(b *testing.B) {
	for _, bm := range []struct {
		name string
		opts Options
	}{
		{"kinesalite", Options{Kinesis: true}},
		{"dynalite", Options{DynamoDB: true}},
		{"kinesis-mock", Options{KinesisMock: true}},
		{"kinesalite+dynalite", Options{Kinesis: true, DynamoDB: true}},
	} {
		b.Run(bm.name, func(b *testing.B) {
			for b.Loop() {
				env, err := Start(b.Context(), bm.opts)
				if err != nil {
					b.Fatal(err)
				}
				if err := env.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
