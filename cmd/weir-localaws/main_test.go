package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirstream/weir/internal/localaws"
)

// TestPinsMatchRepository checks that the pins built into the command are
// the repository's: copy package.json and package-lock.json here after
// changing them at the root.
func TestPinsMatchRepository(t *testing.T) {
	for name, built := range map[string][]byte{"package.json": packageJSON, "package-lock.json": packageLock} {
		root, err := os.ReadFile(filepath.Join("..", "..", name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(root, built) {
			t.Errorf("cmd/weir-localaws/%s differs from the repository's %s: copy it here", name, name)
		}
	}
}

// TestPinsDir checks that the built-in pins are written to the user's cache
// folder, and that a second call leaves them as they are.
func TestPinsDir(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache) // Linux and other Unix
	t.Setenv("HOME", cache)           // macOS: $HOME/Library/Caches
	t.Setenv("LocalAppData", cache)   // Windows
	want, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		dir, err := pinsDir()
		if err != nil {
			t.Fatal(err)
		}
		if dir != filepath.Join(want, "weir-localaws") {
			t.Errorf("pinsDir() = %q, want %q", dir, filepath.Join(want, "weir-localaws"))
		}
		got, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
		if err != nil || !bytes.Equal(got, packageLock) {
			t.Errorf("package-lock.json in %s: %v, equal to the built-in one: %v", dir, err, bytes.Equal(got, packageLock))
		}
		left, err := filepath.Glob(filepath.Join(dir, "*.tmp"))
		if err != nil || len(left) > 0 {
			t.Errorf("temporary files left in %s: %v %v", dir, left, err)
		}
	}
}

// TestRun starts kinesalite and dynalite through run, checks that it prints
// their endpoints as NAME=URL lines and that they accept connections, then
// stops them by ending ctx.
func TestRun(t *testing.T) {
	for _, name := range []string{localaws.EnvKinesisEndpoint, localaws.EnvDynamoDBEndpoint, localaws.EnvKinesisMockEndpoint} {
		t.Setenv(name, "") // start servers, whatever the environment says
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(ctx, localaws.Options{Kinesis: true, DynamoDB: true}, pw, io.Discard)
		pw.CloseWithError(err)
		done <- err
	}()
	got := make(map[string]string)
	sc := bufio.NewScanner(pr)
	for len(got) < 2 && sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), "=")
		if !ok {
			t.Fatalf("output line %q is not NAME=URL", sc.Text())
		}
		got[name] = value
	}
	if len(got) < 2 {
		t.Fatalf("run printed %v, then ended: %v, %v", got, sc.Err(), <-done)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	for _, name := range []string{localaws.EnvKinesisEndpoint, localaws.EnvDynamoDBEndpoint} {
		u, err := url.Parse(got[name])
		if err != nil || u.Scheme != "http" || u.Hostname() != "127.0.0.1" {
			t.Fatalf("%s=%q: want an http URL on 127.0.0.1 (%v)", name, got[name], err)
		}
		c, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatalf("%s=%s: %v", name, got[name], err)
		}
		c.Close()
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run after ctx ended: %v", err)
	}
}
