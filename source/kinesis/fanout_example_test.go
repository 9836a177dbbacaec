package kinesis_test

import (
	"fmt"

	"github.com/weirstream/weir/source/kinesis"
)

// Enhanced fan-out reads every shard through a stream consumer, by default
// one named after the App; New checks the name Kinesis would refuse.
func ExampleFanOutConfig() {
	_, err := kinesis.New(kinesis.Config{Stream: "words", App: "word count", FanOut: &kinesis.FanOutConfig{}})
	fmt.Println(err)

	r, err := kinesis.New(kinesis.Config{Stream: "words", App: "wordcount", FanOut: &kinesis.FanOutConfig{ConsumerName: "wordcount-efo"}})
	fmt.Println(r != nil, err)
	// Output:
	// kinesis: invalid config: FanOut.ConsumerName "word count": a consumer name may hold only letters, digits, '_', '.' and '-' (it defaults to Config.App: set FanOut.ConsumerName)
	// true <nil>
}
