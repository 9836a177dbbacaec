package localaws

import (
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
)

// TestShared checks that Shared starts once, hands out one Env, and stops it
// on Close.
func TestShared(t *testing.T) {
	t.Parallel()
	s := NewShared(Options{Kinesis: true})
	t.Cleanup(func() { _ = s.Close() })
	first, second := s.Env(t), s.Env(t)
	if first != second {
		t.Fatalf("Env returned two different Envs")
	}
	if err := first.CreateStream(t.Context(), UniqueName(t), 1); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Close waited for kinesalite to exit, so nothing listens on its port.
	if _, err := first.Kinesis().ListStreams(t.Context(), &kinesis.ListStreamsInput{}); err == nil {
		t.Errorf("kinesalite still serving after Shared.Close")
	}
	if _, err := s.get(); err == nil {
		t.Errorf("Shared.get after Close: got no error")
	}
}

// TestUniqueName checks that names are valid for streams and tables, bounded
// and distinct.
func TestUniqueName(t *testing.T) {
	t.Parallel()
	valid := regexp.MustCompile(`^[a-zA-Z0-9_.-]{3,128}$`)
	for _, name := range []string{"plain", "with spaces/and#slashes", strings.Repeat("long", 60)} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			a, b := UniqueName(t), UniqueName(t)
			if !valid.MatchString(a) {
				t.Errorf("UniqueName = %q, not a valid stream or table name", a)
			}
			if a == b {
				t.Errorf("UniqueName returned %q twice", a)
			}
		})
	}
}
