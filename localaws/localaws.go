package localaws

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	internal "github.com/weirstream/weir/internal/localaws"
)

// Options selects the servers Start provides; see its fields. The zero value
// selects none and is refused. Options.Dir, when empty, defaults here to a
// folder of the user's cache directory.
type Options = internal.Options

// Env is a set of running local servers: their endpoints, AWS clients and
// configuration for them, and helpers to create streams and put records.
// Close stops the servers.
type Env = internal.Env

// Environment variables Start reads: an endpoint variable set to a loopback
// URL is used instead of starting that server; EnvDir names the folder of
// package.json instead of the cache directory.
const (
	EnvKinesisEndpoint     = internal.EnvKinesisEndpoint
	EnvDynamoDBEndpoint    = internal.EnvDynamoDBEndpoint
	EnvKinesisMockEndpoint = internal.EnvKinesisMockEndpoint
	EnvDir                 = internal.EnvDir
)

// Region is the AWS region of every client and configuration an Env makes.
const Region = internal.Region

// Errors Start's error may wrap.
var (
	// ErrInvalidOptions: bad Options.
	ErrInvalidOptions = internal.ErrInvalidOptions
	// ErrNotLoopback: an endpoint variable names a host other than loopback.
	ErrNotLoopback = internal.ErrNotLoopback
	// ErrNodeMissing: node or npm is not in PATH.
	ErrNodeMissing = internal.ErrNodeMissing
)

//go:embed npm/package.json npm/package-lock.json
var pins embed.FS

// Start provides the servers opts asks for, on free 127.0.0.1 ports, after
// installing them if needed (see the package doc), and returns them
// running. ctx bounds the start only: the caller must Close the Env. On
// error, everything started is stopped.
func Start(ctx context.Context, opts Options) (*Env, error) {
	if opts.Dir == "" && os.Getenv(EnvDir) == "" {
		dir, err := cacheDir()
		if err != nil {
			return nil, err
		}
		opts.Dir = dir
	}
	return internal.Start(ctx, opts)
}

// ForTest starts the servers opts asks for, as Start does, and stops them
// when tb and its subtests are done. An error fails tb at once (Fatal).
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

// CreateStreamOn creates a provisioned stream of shards shards through c
// (a client of any of the servers) and waits until it is ACTIVE.
func CreateStreamOn(ctx context.Context, c *kinesis.Client, name string, shards int) error {
	return internal.CreateStreamOn(ctx, c, name, shards)
}

// PutRecordsOn puts records on stream through c, retrying failed entries;
// record i gets partition key partitionKey(i), or its index if nil.
func PutRecordsOn(ctx context.Context, c *kinesis.Client, stream string, records [][]byte, partitionKey func(i int) string) error {
	return internal.PutRecordsOn(ctx, c, stream, records, partitionKey)
}

// cacheDir returns the folder of the user's cache directory that holds the
// pinned package.json and lock file, writing them there if they are missing
// or differ. The folder is named after the lock file's hash, so a weir
// version with other pins installs beside, not over, another's.
func cacheDir() (string, error) {
	lock, err := pins.ReadFile("npm/package-lock.json")
	if err != nil {
		return "", fmt.Errorf("localaws: %w", err)
	}
	manifest, err := pins.ReadFile("npm/package.json")
	if err != nil {
		return "", fmt.Errorf("localaws: %w", err)
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("localaws: no cache directory for the servers (%w): set Options.Dir or %s", err, EnvDir)
	}
	sum := sha256.Sum256(lock)
	dir := filepath.Join(base, "weir", "localaws", hex.EncodeToString(sum[:6]))
	if err := writePins(dir, manifest, lock); err != nil {
		return "", err
	}
	return dir, nil
}

// writePins writes package.json and package-lock.json into dir unless they
// are there already, each through a temporary file renamed into place, so
// that concurrent processes never see half a file.
func writePins(dir string, manifest, lock []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("localaws: %w", err)
	}
	for name, data := range map[string][]byte{"package.json": manifest, "package-lock.json": lock} {
		path := filepath.Join(dir, name)
		if cur, err := os.ReadFile(path); err == nil && bytes.Equal(cur, data) {
			continue
		}
		tmp, err := os.CreateTemp(dir, name+".*")
		if err != nil {
			return fmt.Errorf("localaws: %w", err)
		}
		_, werr := tmp.Write(data)
		cerr := tmp.Close()
		if err := errors.Join(werr, cerr); err != nil {
			os.Remove(tmp.Name())
			return fmt.Errorf("localaws: writing %s: %w", path, err)
		}
		if err := os.Rename(tmp.Name(), path); err != nil {
			os.Remove(tmp.Name())
			return fmt.Errorf("localaws: %w", err)
		}
	}
	return nil
}
