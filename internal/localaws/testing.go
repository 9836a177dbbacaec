package localaws

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// sharedStartTimeout bounds the start of a Shared set of servers.
const sharedStartTimeout = 3 * time.Minute

// Shared is one set of servers for every test of a test binary, started on
// the first call of Env and stopped by Close (or by Run at the end). Tests
// sharing it must use names of their own for streams and tables, e.g. from
// UniqueName. It is safe for concurrent use. Typical use:
//
//	var servers = localaws.NewShared(localaws.Options{Kinesis: true, DynamoDB: true})
//
//	func TestMain(m *testing.M) { os.Exit(servers.Run(m)) }
//
//	func TestX(t *testing.T) { env := servers.Env(t); ... }
type Shared struct {
	opts Options

	mu     sync.Mutex
	env    *Env
	err    error // the error of the first start, returned to every later caller
	closed bool
}

// NewShared returns a Shared that will start the servers opts asks for.
func NewShared(opts Options) *Shared {
	return &Shared{opts: opts}
}

// Env returns the shared servers, starting them on first use. If they cannot
// be started, or Close was called, it fails tb at once; a failed start is
// not retried.
func (s *Shared) Env(tb testing.TB) *Env {
	tb.Helper()
	env, err := s.get()
	if err != nil {
		tb.Fatalf("shared servers: %v", err)
	}
	return env
}

// get starts the servers once and returns them.
func (s *Shared) get() (*Env, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("Shared.Env called after Close")
	}
	if s.env == nil && s.err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), sharedStartTimeout)
		defer cancel()
		s.env, s.err = Start(ctx, s.opts)
	}
	return s.env, s.err
}

// Close stops the shared servers if they were started. It is idempotent.
func (s *Shared) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.env == nil {
		return nil
	}
	return s.env.Close()
}

// Run runs the tests of m, then closes s, and returns the exit code for
// os.Exit: m's, or 1 if closing failed.
func (s *Shared) Run(m *testing.M) int {
	code := m.Run()
	if err := s.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "localaws: close shared servers: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// UniqueName returns a name for a stream or table that no other test uses:
// tb's name with unsafe characters replaced, shortened, and a random suffix.
// It is valid for both Kinesis streams and DynamoDB tables.
func UniqueName(tb testing.TB) string {
	name := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '.', r == '-':
			return r
		default:
			return '-'
		}
	}, tb.Name())
	if len(name) > 100 {
		name = name[:100]
	}
	return fmt.Sprintf("%s-%08x", name, rand.Uint32())
}
