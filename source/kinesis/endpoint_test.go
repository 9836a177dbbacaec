package kinesis

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
)

// TestEndpointOf checks the endpoint warnings name: Config.Endpoint for the
// default client, the given Client's own otherwise, since it ignores
// Config.Endpoint.
func TestEndpointOf(t *testing.T) {
	withBase := awskinesis.New(awskinesis.Options{BaseEndpoint: aws.String("http://client:4567"), Region: "eu-west-1"})
	withRegion := awskinesis.New(awskinesis.Options{Region: "eu-west-1"})
	noRegion := awskinesis.New(awskinesis.Options{})
	wrapper := struct{ Client }{withBase}
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"default client", Config{Endpoint: "http://cfg:4567"}, "http://cfg:4567"},
		{"default client, AWS default", Config{}, ""},
		{"client with BaseEndpoint", Config{Endpoint: "http://cfg:4567", Client: withBase}, "http://client:4567"},
		{"client with a region", Config{Endpoint: "http://cfg:4567", Client: withRegion}, "https://kinesis.eu-west-1.amazonaws.com"},
		{"client without region", Config{Client: noRegion}, `the given Client (no endpoint resolved for region "")`},
		{"wrapped client", Config{Endpoint: "http://cfg:4567", Client: wrapper}, "the given Client"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := tt.cfg.Client
			if client == nil {
				client = withRegion // built from the Config; not looked at
			}
			if got := endpointOf(tt.cfg, client); got != tt.want {
				t.Errorf("endpointOf: got %q, want %q", got, tt.want)
			}
		})
	}
}
