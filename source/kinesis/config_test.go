package kinesis

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/weirstream/weir/checkpoint/leasetable"
)

func TestNewValidatesConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want []string // substrings the error must hold; nil for a valid config
	}{
		{name: "minimal", cfg: Config{Stream: "s", App: "a"}},
		{name: "arn", cfg: Config{Stream: "arn:aws:kinesis:us-east-1:123456789012:stream/words", App: "a"}},
		{name: "at timestamp", cfg: Config{Stream: "s", App: "a", InitialPosition: AtTimestamp, AtTimestamp: time.Unix(1, 0)}},
		{name: "empty", cfg: Config{}, want: []string{"Stream is empty", "App \"\""}},
		{name: "bad name", cfg: Config{Stream: "a b", App: "a"}, want: []string{`Stream "a b"`}},
		{name: "bad arn", cfg: Config{Stream: "arn:aws:s3:::bucket", App: "a"}, want: []string{"an ARN must look like"}},
		{name: "bad rate", cfg: Config{Stream: "s", App: "a", MaxRecordsPerSecond: -1, Backpressure: true}, want: []string{"MaxRecordsPerSecond -1: must be > 0"}},
		{
			name: "everything wrong",
			cfg: Config{
				Stream: "s", App: "a", InitialPosition: "EARLIEST", Endpoint: "127.0.0.1:4567",
				RecordsPerRead: 10001, PollInterval: -1, MinReadInterval: -time.Millisecond, ShardSyncInterval: -time.Second,
				RetryBaseDelay: time.Second, RetryMaxDelay: time.Millisecond,
				RecomputeTimeout: -1, MaxAttempts: -2,
			},
			want: []string{
				`InitialPosition "EARLIEST"`, `Endpoint "127.0.0.1:4567"`, "RecordsPerRead 10001",
				"PollInterval -1ns", "MinReadInterval -1ms: must be > 0 (0 means 200ms)", "ShardSyncInterval -1s", "RetryMaxDelay 1ms: must be >= RetryBaseDelay",
				"RecomputeTimeout -1ns", "MaxAttempts -2",
			},
		},
		// Seconds meant, nanoseconds written: ListShards back to back,
		// attempts that can never finish.
		{name: "nanoseconds", cfg: Config{Stream: "s", App: "a", ShardSyncInterval: 10, AttemptTimeout: 10, PollInterval: 5},
			want: []string{"ShardSyncInterval 10ns: must be at least 1ms", "AttemptTimeout 10ns: must be at least 1ms",
				"PollInterval 5ns: must be at least 1ms", "n * time.Second"}},
		{name: "lease intervals in nanoseconds", cfg: Config{Stream: "s", App: "a",
			Leases: &leasetable.Config{TableName: "t", RenewInterval: 3, TakeInterval: 3, ScanInterval: 3, CheckpointInterval: 3}},
			want: []string{"RenewInterval 3ns: must be at least 1ms", "TakeInterval 3ns", "ScanInterval 3ns", "CheckpointInterval 3ns", "n * time.Second"}},
		{name: "timestamp without its position", cfg: Config{Stream: "s", App: "a", AtTimestamp: time.Unix(1, 0)},
			want: []string{`AtTimestamp is set with InitialPosition "LATEST"`, "set InitialPosition to AT_TIMESTAMP"}},
		{name: "timestamp with trim horizon", cfg: Config{Stream: "s", App: "a", InitialPosition: TrimHorizon, AtTimestamp: time.Unix(1, 0)},
			want: []string{`AtTimestamp is set with InitialPosition "TRIM_HORIZON"`}},
		{name: "timestamp missing", cfg: Config{Stream: "s", App: "a", InitialPosition: AtTimestamp}, want: []string{"AtTimestamp is zero"}},
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
			var missing []string
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					missing = append(missing, w)
				}
			}
			if len(missing) > 0 {
				t.Errorf("New error %q lacks %q", err, missing)
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	got := Config{Stream: "s", App: "a"}.withDefaults()
	want := Config{
		Stream: "s", App: "a", InitialPosition: Latest, RecordsPerRead: 10000, PollInterval: 500 * time.Millisecond, MinReadInterval: 200 * time.Millisecond,
		ShardSyncInterval: 10 * time.Second, RetryBaseDelay: 100 * time.Millisecond, RetryMaxDelay: 5 * time.Second,
		RecomputeTimeout: time.Minute, AttemptTimeout: 10 * time.Second, MaxAttempts: 20,
	}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreUnexported(Config{})); diff != "" {
		t.Errorf("withDefaults (-want +got):\n%s", diff)
	}
}

func TestStreamNameOfARN(t *testing.T) {
	tests := []struct {
		arn  string
		name string
		ok   bool
	}{
		{"arn:aws:kinesis:us-east-1:123456789012:stream/words", "words", true},
		{"arn:aws-cn:kinesis:cn-north-1:123456789012:stream/a.b-c_d", "a.b-c_d", true},
		{"arn:aws:kinesis:us-east-1:123456789012:stream/", "", false},
		{"arn:aws:kinesis:us-east-1:123456789012:stream/a/consumer/b", "", false},
		{"arn:aws:dynamodb:us-east-1:123456789012:table/t", "", false},
		{"arn:aws:kinesis", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.arn, func(t *testing.T) {
			name, ok := streamNameOfARN(tt.arn)
			if name != tt.name || ok != tt.ok {
				t.Errorf("streamNameOfARN = %q, %v; want %q, %v", name, ok, tt.name, tt.ok)
			}
		})
	}
}
