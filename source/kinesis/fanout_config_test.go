package kinesis

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/source/kinesis/kinesistest"
)

func TestFanOutConfigValidation(t *testing.T) {
	const arn = "arn:aws:kinesis:us-east-1:123456789012:stream/words/consumer/wc:1700000000"
	tests := []struct {
		name string
		cfg  Config
		want []string // substrings the error must hold; nil for a valid config
	}{
		{name: "defaults", cfg: Config{Stream: "s", App: "wordcount", FanOut: &FanOutConfig{}}},
		{name: "consumer ARN", cfg: Config{Stream: "words", App: "a", FanOut: &FanOutConfig{ConsumerARN: arn}}},
		{name: "consumer ARN, stream ARN", cfg: Config{Stream: "arn:aws:kinesis:us-east-1:123456789012:stream/words", App: "a", FanOut: &FanOutConfig{ConsumerARN: arn}}},
		{name: "consumer ARN of another stream", cfg: Config{Stream: "s", App: "a", FanOut: &FanOutConfig{ConsumerARN: arn}},
			want: []string{`FanOut.ConsumerARN "` + arn + `": a consumer of stream "words", not of Config.Stream "s"`}},
		{name: "consumer ARN and name", cfg: Config{Stream: "words", App: "a", FanOut: &FanOutConfig{ConsumerARN: arn, ConsumerName: "other"}},
			want: []string{`FanOut.ConsumerName "other" with FanOut.ConsumerARN`}},
		{name: "app is no consumer name", cfg: Config{Stream: "s", App: "word count", FanOut: &FanOutConfig{}},
			want: []string{`FanOut.ConsumerName "word count"`, "set FanOut.ConsumerName"}},
		{name: "long name", cfg: Config{Stream: "s", App: "a", FanOut: &FanOutConfig{ConsumerName: strings.Repeat("c", 129)}},
			want: []string{"at most 128 characters"}},
		{
			name: "everything wrong",
			cfg: Config{Stream: "s", App: "a", FanOut: &FanOutConfig{
				ConsumerARN: "arn:aws:kinesis:us-east-1:123456789012:stream/words", DeregisterOnStop: true, RegisterTimeout: -time.Second,
			}},
			want: []string{
				`FanOut.ConsumerARN "arn:aws:kinesis:us-east-1:123456789012:stream/words": must look like`,
				"FanOut.DeregisterOnStop with FanOut.ConsumerARN",
				"FanOut.RegisterTimeout -1s: must be > 0 (0 means 2m0s)",
			},
		},
		{name: "client without fan-out calls", cfg: Config{Stream: "s", App: "a", Client: kinesistest.New(), FanOut: &FanOutConfig{}},
			want: []string{"FanOut with Client *kinesistest.Fake: the client lacks the enhanced fan-out calls", "leave FanOut nil to poll"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := New(tt.cfg)
			if tt.want == nil {
				if err != nil || r == nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("New: error %v, want ErrInvalidConfig", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("New error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestFanOutConfigDefaults(t *testing.T) {
	in := &FanOutConfig{}
	r, err := New(Config{Stream: "s", App: "wordcount", FanOut: in})
	if err != nil {
		t.Fatal(err)
	}
	want := FanOutConfig{
		ConsumerName: "wordcount", RegisterTimeout: defaultRegisterTimeout,
		lifetime: 5*time.Minute + 15*time.Second, idleTimeout: time.Minute, minSubscribeInterval: time.Second,
	}
	if diff := cmp.Diff(want, *r.cfg.FanOut, cmp.AllowUnexported(FanOutConfig{})); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(FanOutConfig{}, *in, cmp.AllowUnexported(FanOutConfig{})); diff != "" {
		t.Errorf("New changed the caller's FanOutConfig (-want +got):\n%s", diff)
	}
	byARN, err := New(Config{Stream: "s", App: "wordcount", FanOut: &FanOutConfig{ConsumerARN: "arn:aws:kinesis:us-east-1:1:stream/s/consumer/c:1"}})
	if err != nil {
		t.Fatal(err)
	}
	if byARN.cfg.FanOut.ConsumerName != "" {
		t.Errorf("ConsumerName %q with a ConsumerARN, want none", byARN.cfg.FanOut.ConsumerName)
	}
}
