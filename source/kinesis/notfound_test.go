package kinesis

import (
	"context"
	"errors"
	"strings"
	"testing"

	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/localaws"
	"github.com/weirstream/weir/source"
)

// TestStreamNotFoundNamesWhereItLooked: a stream created in another
// region than the receiver's, here on another kinesalite than the one
// Config.Endpoint names, fails Start naming the endpoint and the region
// the receiver asked, so that the user sees which one is wrong. Before,
// the error said to check the region and the endpoint without naming
// either.
func TestStreamNotFoundNamesWhereItLooked(t *testing.T) {
	env := servers.Env(t)
	elsewhere := localaws.ForTest(t, localaws.Options{Kinesis: true})
	stream := newStream(t, env, 1)
	cfg := baseConfig(elsewhere, stream)
	cfg.AWS.Region = "eu-west-3"
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	err = r.Start(t.Context(), source.Runtime[Record]{Push: func(context.Context, source.Block[Record]) (batch.BlockInfo, error) {
		return batch.BlockInfo{}, nil
	}})
	if !errors.Is(err, ErrStreamNotFound) {
		t.Fatalf("Start = %v, want ErrStreamNotFound", err)
	}
	for _, want := range []string{stream, elsewhere.KinesisEndpoint, `region "eu-west-3"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Start = %v\nwant it to name %q", err, want)
		}
	}
	// Without an endpoint set: AWS's for the region, resolved without a
	// call.
	client := awskinesis.New(awskinesis.Options{Region: "eu-west-3"})
	if got, want := placeOf(Config{}, client), `https://kinesis.eu-west-3.amazonaws.com (region "eu-west-3")`; got != want {
		t.Errorf("placeOf the default client of eu-west-3 = %q, want %q", got, want)
	}
}
