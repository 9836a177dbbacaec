package kinesis

import (
	"context"
	"strings"
	"testing"
	"time"

	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/weirstream/weir/source"
)

// TestClientPanicStopsStart checks that a Config.Client that panics (a
// user's wrapper with a bug), called from the receiver's own goroutines,
// makes Start return an error naming the panic, where it is and its stack,
// rather than crashing the process (kinesalite).
func TestClientPanicStopsStart(t *testing.T) {
	env := servers.Env(t)
	stream := newStream(t, env, 1)
	if err := env.PutRecords(t.Context(), stream, payloads("p", 3), nil); err != nil {
		t.Fatal(err)
	}
	cfg := baseConfig(env, stream)
	cfg.Client = &hookClient{
		Client: env.Kinesis(),
		getRecords: func(context.Context, *awskinesis.GetRecordsInput, Client) (*awskinesis.GetRecordsOutput, error) {
			panic("wrapper bug")
		},
	}
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := newCollector(3)
	errc := make(chan error, 1)
	go func() {
		errc <- r.Start(t.Context(), source.Runtime[Record]{Push: c.push, BlockInterval: 5 * time.Millisecond, ReportError: c.reportError})
	}()
	select {
	case err = <-errc:
	case <-time.After(waitLimit):
		r.Stop(t.Context())
		t.Fatal("Start did not return after the client panicked")
	}
	for _, want := range []string{"the Kinesis client panicked: panic: wrapper bug", "TestClientPanicStopsStart", "GetRecords"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Start = %v, want an error containing %q", err, want)
		}
	}
}
