package localaws

import (
	"errors"
	"strings"
	"testing"
)

// TestCheckEndpoint accepts loopback http(s) URLs only.
func TestCheckEndpoint(t *testing.T) {
	t.Parallel()
	tests := []struct {
		raw     string
		want    string
		wantErr error // nil: accepted; errAny: rejected for another reason
	}{
		{raw: "http://127.0.0.1:4567", want: "http://127.0.0.1:4567"},
		{raw: "http://127.0.0.1:4567/", want: "http://127.0.0.1:4567"},
		{raw: "https://localhost:4567", want: "https://localhost:4567"},
		{raw: "http://[::1]:8000", want: "http://[::1]:8000"},
		{raw: "http://127.3.2.1:8000", want: "http://127.3.2.1:8000"},
		{raw: "http://10.0.0.1:4567", wantErr: ErrNotLoopback},
		{raw: "http://0.0.0.0:4567", wantErr: ErrNotLoopback},
		{raw: "https://kinesis.us-east-1.amazonaws.com", wantErr: ErrNotLoopback},
		{raw: "http://localhost.example.com:80", wantErr: ErrNotLoopback},
		{raw: "127.0.0.1:4567", wantErr: errAny},
		{raw: "ftp://127.0.0.1:21", wantErr: errAny},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			t.Parallel()
			got, err := checkEndpoint(EnvKinesisEndpoint, tt.raw)
			switch {
			case tt.wantErr == nil && err != nil:
				t.Fatalf("checkEndpoint(%q) = %v, want %q", tt.raw, err, tt.want)
			case tt.wantErr == nil && got != tt.want:
				t.Errorf("checkEndpoint(%q) = %q, want %q", tt.raw, got, tt.want)
			case tt.wantErr == errAny && err == nil, tt.wantErr != nil && tt.wantErr != errAny && !errors.Is(err, tt.wantErr):
				t.Errorf("checkEndpoint(%q) = %q, %v; want error %v", tt.raw, got, err, tt.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), EnvKinesisEndpoint) {
				t.Errorf("error %q does not name the variable %s", err, EnvKinesisEndpoint)
			}
		})
	}
}

// errAny in a test table means "any error".
var errAny = errors.New("any error")

// TestStartRejects checks errors Start reports before starting anything.
func TestStartRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		opts    Options
		vars    map[string]string
		wantErr error
		wantIn  []string // substrings of the error
	}{
		{
			name:    "nothing asked for",
			wantErr: ErrInvalidOptions,
			wantIn:  []string{"set at least one"},
		},
		{
			name:    "relative DataDir",
			opts:    Options{Kinesis: true, DataDir: "data"},
			wantErr: ErrInvalidOptions,
			wantIn:  []string{`DataDir "data"`},
		},
		{
			name: "remote endpoints",
			opts: Options{Kinesis: true, DynamoDB: true},
			vars: map[string]string{
				EnvKinesisEndpoint:  "https://kinesis.us-east-1.amazonaws.com",
				EnvDynamoDBEndpoint: "http://192.168.1.9:8000",
			},
			wantErr: ErrNotLoopback,
			wantIn:  []string{EnvKinesisEndpoint, EnvDynamoDBEndpoint},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env, err := start(t.Context(), tt.opts, func(k string) string { return tt.vars[k] })
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("start = %v, %v; want error %v", env, err, tt.wantErr)
			}
			for _, s := range tt.wantIn {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
		})
	}
}

// TestNodeMissing checks that a missing node binary is reported with advice.
func TestNodeMissing(t *testing.T) {
	t.Parallel()
	_, err := lookNode("node-that-is-not-installed")
	if !errors.Is(err, ErrNodeMissing) {
		t.Fatalf("lookNode: got %v, want ErrNodeMissing", err)
	}
	for _, s := range []string{"Node.js 20", "npm", EnvKinesisEndpoint} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
}
