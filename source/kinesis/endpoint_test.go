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

// TestEndpointOfEnvironment checks that the default client's endpoint is
// the one the AWS configuration gives when Config.Endpoint is not set (as
// for LocalStack): warnings and errors named "AWS default for the region"
// while the calls went there.
func TestEndpointOfEnvironment(t *testing.T) {
	for _, env := range []string{"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_KINESIS"} {
		t.Run(env, func(t *testing.T) {
			t.Setenv(env, "http://127.0.0.1:9")
			t.Setenv("AWS_REGION", "us-east-1")
			t.Setenv("AWS_ACCESS_KEY_ID", "x")
			t.Setenv("AWS_SECRET_ACCESS_KEY", "y")
			t.Setenv("AWS_CONFIG_FILE", "/dev/null")
			t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
			client, err := newDefaultClient(t.Context(), Config{})
			if err != nil {
				t.Fatal(err)
			}
			if got, want := endpointOf(Config{}, client), "http://127.0.0.1:9"; got != want {
				t.Errorf("endpointOf: got %q, want %q", got, want)
			}
			if got, want := endpointOf(Config{Endpoint: "http://cfg:4567"}, client), "http://cfg:4567"; got != want {
				t.Errorf("endpointOf with Config.Endpoint: got %q, want %q", got, want)
			}
		})
	}
}
