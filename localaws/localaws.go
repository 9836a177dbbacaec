package localaws

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sync/errgroup"
)

// Environment variables read by Start.
const (
	// EnvKinesisEndpoint, when set, is the Kinesis endpoint used instead of
	// starting kinesalite, e.g. "http://127.0.0.1:4567".
	EnvKinesisEndpoint = "WEIR_KINESIS_ENDPOINT"
	// EnvDynamoDBEndpoint, when set, is the DynamoDB endpoint used instead of
	// starting dynalite.
	EnvDynamoDBEndpoint = "WEIR_DYNAMODB_ENDPOINT"
	// EnvKinesisMockEndpoint, when set, is the endpoint used instead of
	// starting kinesis-mock.
	EnvKinesisMockEndpoint = "WEIR_KINESIS_MOCK_ENDPOINT"
	// EnvDir, when set, is the folder holding package.json and node_modules,
	// used instead of a weir checkout at or above the working directory or
	// the user's cache directory (see Options.Dir).
	EnvDir = "WEIR_LOCALAWS_DIR"
)

// Region is the AWS region of every client made by an Env.
const Region = "us-east-1"

var (
	// ErrInvalidOptions is wrapped by Start's error for bad Options.
	ErrInvalidOptions = errors.New("localaws: invalid options")
	// ErrNotLoopback is wrapped by Start's error when an endpoint variable
	// names a host other than 127.0.0.1, ::1 or localhost.
	ErrNotLoopback = errors.New("localaws: endpoint is not a loopback address")
	// ErrNodeMissing is wrapped by Start's error when node or npm is not in PATH.
	ErrNodeMissing = errors.New("localaws: Node.js is missing")
)

// Options selects the servers Start provides. The zero value selects none and
// is rejected by Start.
type Options struct {
	// Kinesis starts kinesalite (fast, no UpdateShardCount, no ChildShards).
	Kinesis bool
	// DynamoDB starts dynalite.
	DynamoDB bool
	// KinesisMock starts kinesis-mock (full API, 1.5–3 s to start, slow puts).
	KinesisMock bool
	// DataDir, if not empty, makes the servers persist under DataDir/<server>,
	// so a later Start with the same DataDir sees the same streams and tables.
	// Empty (the default) keeps everything in memory.
	DataDir string
	// Logger receives start, stop and unexpected-exit messages. Nil (the
	// default) means slog.Default(), so a server that dies is seen.
	Logger *slog.Logger
	// Dir, if not empty, is the folder holding package.json, where the
	// pinned servers are installed (npm ci) if missing; it takes precedence
	// over EnvDir. Empty (the default): EnvDir, else the nearest weir
	// checkout at or above the working directory, else a folder of the
	// user's cache directory (os.UserCacheDir()/weir/localaws/<pin>) into
	// which the package.json and lock file built into this package are
	// written.
	Dir string
}

// Env is a set of running local AWS servers, or of endpoints taken from the
// environment: their endpoints, AWS clients and a configuration for them,
// and helpers to create streams and put records. Its methods are safe for
// concurrent use. Close stops the servers.
type Env struct {
	// KinesisEndpoint is kinesalite's endpoint, e.g. "http://127.0.0.1:41234",
	// or "" if Options.Kinesis was false.
	KinesisEndpoint string
	// DynamoDBEndpoint is dynalite's endpoint, or "" if Options.DynamoDB was false.
	DynamoDBEndpoint string
	// KinesisMockEndpoint is kinesis-mock's plain HTTP endpoint, or "" if
	// Options.KinesisMock was false.
	KinesisMockEndpoint string

	logger    *slog.Logger
	transport *http.Transport // of every client made by the methods; nil in a zero Env
	procs     []*process      // started by Start; stopped by Close

	closeOnce sync.Once
	closeErr  error
}

// Start provides the servers opts asks for. For each one, the endpoint in its
// environment variable (EnvKinesisEndpoint etc.) is used if set; otherwise the
// server is started on a free 127.0.0.1 port, after `npm ci` if the pinned
// packages are not installed. ctx bounds the start only, not the servers'
// lifetime: the caller must Close the returned Env. On error, everything
// started is stopped.
func Start(ctx context.Context, opts Options) (*Env, error) {
	return start(ctx, opts, os.Getenv)
}

// ForTest starts the servers opts asks for, as Start does, and stops them
// when tb and its subtests are done. Any error fails tb at once (Fatal):
// a test that needs the servers never skips.
func ForTest(tb testing.TB, opts Options) *Env {
	tb.Helper()
	env, err := Start(tb.Context(), opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := env.Close(); err != nil {
			tb.Errorf("localaws: close: %v", err)
		}
	})
	return env
}

// start is Start with the environment passed in.
func start(ctx context.Context, opts Options, getenv func(string) string) (*Env, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if opts.Dir != "" {
		environ := getenv
		getenv = func(k string) string {
			if k == EnvDir {
				return opts.Dir
			}
			return environ(k)
		}
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	env := &Env{logger: logger, transport: newTransport()}
	var need []kind
	var problems []error
	for k := range numKinds {
		if !k.wanted(opts) {
			continue
		}
		raw := getenv(k.envVar())
		if raw == "" {
			need = append(need, k)
			continue
		}
		endpoint, err := checkEndpoint(k.envVar(), raw)
		if err != nil {
			problems = append(problems, err)
			continue
		}
		*env.endpoint(k) = endpoint
		logger.Debug("localaws: using endpoint from environment", "server", k.String(), "endpoint", endpoint)
	}
	if len(problems) > 0 {
		return nil, errors.Join(problems...)
	}
	if len(need) == 0 {
		return env, nil
	}
	if err := env.startAll(ctx, need, opts.DataDir, getenv); err != nil {
		return nil, errors.Join(err, env.Close())
	}
	return env, nil
}

// validate reports every problem with opts.
func (o Options) validate() error {
	var problems []error
	if !o.Kinesis && !o.DynamoDB && !o.KinesisMock {
		problems = append(problems, errors.New("Kinesis, DynamoDB and KinesisMock are all false: set at least one"))
	}
	if o.DataDir != "" && !filepath.IsAbs(o.DataDir) {
		problems = append(problems, fmt.Errorf("DataDir %q: must be an absolute path (e.g. from t.TempDir())", o.DataDir))
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidOptions, errors.Join(problems...))
	}
	return nil
}

// endpoint returns the field holding k's endpoint.
func (e *Env) endpoint(k kind) *string {
	switch k {
	case kindKinesis:
		return &e.KinesisEndpoint
	case kindDynamoDB:
		return &e.DynamoDBEndpoint
	default:
		return &e.KinesisMockEndpoint
	}
}

// startAll installs the packages if needed and starts the servers in need
// concurrently. Started processes are recorded in e.procs even on error.
func (e *Env) startAll(ctx context.Context, need []kind, dataDir string, getenv func(string) string) error {
	root, err := findRoot(getenv)
	if err != nil {
		return err
	}
	node, err := lookNode("node")
	if err != nil {
		return err
	}
	if err := ensureInstalled(ctx, root, e.logger); err != nil {
		return err
	}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	for _, k := range need {
		g.Go(func() error {
			p, endpoint, err := startServer(gctx, k, node, root, dataDir, e.logger)
			if err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			e.procs = append(e.procs, p)
			*e.endpoint(k) = endpoint
			return nil
		})
	}
	return g.Wait()
}

// Close stops every server Start started (on Unix SIGTERM, then SIGKILL after
// a grace period; on Windows it kills them at once) and waits for them to
// exit. Endpoints taken from the environment are
// left alone. Close is idempotent; later calls return the first result.
func (e *Env) Close() error {
	e.closeOnce.Do(func() {
		if e.transport != nil {
			// Idle keep-alive connections make kinesis-mock wait before it exits.
			e.transport.CloseIdleConnections()
		}
		var wg sync.WaitGroup
		errs := make([]error, len(e.procs))
		for i, p := range e.procs {
			wg.Go(func() { errs[i] = p.stop() })
		}
		wg.Wait()
		e.closeErr = errors.Join(errs...)
	})
	return e.closeErr
}

// checkEndpoint validates the endpoint raw taken from variable name: an
// http(s) URL whose host is a loopback address.
func checkEndpoint(name, raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("localaws: %s=%q: %w", name, raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("localaws: %s=%q: scheme %q: want http or https, e.g. http://127.0.0.1:4567", name, raw, u.Scheme)
	}
	if !isLoopback(u.Hostname()) {
		return "", fmt.Errorf("%w: %s=%q: host %q: tests only talk to 127.0.0.1, ::1 or localhost",
			ErrNotLoopback, name, raw, u.Hostname())
	}
	return strings.TrimRight(raw, "/"), nil
}

// isLoopback reports whether host is "localhost" or a loopback IP literal.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
