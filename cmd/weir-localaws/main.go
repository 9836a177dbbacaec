// Command weir-localaws starts the local AWS servers weir's own tests use
// (kinesalite for Kinesis, dynalite for DynamoDB and, on request,
// kinesis-mock) on free ports of 127.0.0.1, prints their endpoints, and runs
// until it is interrupted (Ctrl-C or SIGTERM), then stops them. It lets your
// own applications and tests run against the same servers, with no AWS
// account:
//
//	go run github.com/weirstream/weir/cmd/weir-localaws
//	WEIR_KINESIS_ENDPOINT=http://127.0.0.1:40123
//	WEIR_DYNAMODB_ENDPOINT=http://127.0.0.1:40124
//
// Each line of standard output is NAME=URL, so a shell can read them; the
// names are the variables weir's test helpers read, so tests in a weir
// checkout use these servers instead of starting their own. Point an AWS SDK
// client at an endpoint with its BaseEndpoint option, region us-east-1 and
// any static credentials. Messages go to standard error.
//
// It needs Node.js 20 or newer and npm. The servers are the npm packages
// pinned in weir's package.json and package-lock.json, installed with
// `npm ci` on first use: into the weir checkout the command runs in, the
// folder named by WEIR_LOCALAWS_DIR, or else a folder of the user's cache
// directory holding the copy of those pins built into the command.
//
// Flags:
//
//	-kinesis        start kinesalite (default true)
//	-dynamodb       start dynalite (default true)
//	-kinesis-mock   start kinesis-mock, the fuller Kinesis API (default false)
//	-data DIR       keep the servers' data under DIR across runs (default: in memory)
//	-v              log starts, stops and installs to standard error
package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/weirstream/weir/internal/localaws"
)

// The pins of the servers, copies of the repository's package.json and
// package-lock.json (a test keeps them equal), for use outside a checkout.
var (
	//go:embed package.json
	packageJSON []byte
	//go:embed package-lock.json
	packageLock []byte
)

func main() {
	fs := flag.NewFlagSet("weir-localaws", flag.ContinueOnError)
	var opts localaws.Options
	fs.BoolVar(&opts.Kinesis, "kinesis", true, "start kinesalite (Kinesis)")
	fs.BoolVar(&opts.DynamoDB, "dynamodb", true, "start dynalite (DynamoDB)")
	fs.BoolVar(&opts.KinesisMock, "kinesis-mock", false, "start kinesis-mock (the fuller Kinesis API: UpdateShardCount, ChildShards, enhanced fan-out)")
	fs.StringVar(&opts.DataDir, "data", "", "keep the servers' data under this folder across runs (default: in memory)")
	verbose := fs.Bool("v", false, "log starts, stops and installs to standard error")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		os.Exit(2)
	}
	if fs.NArg() > 0 || !(opts.Kinesis || opts.DynamoDB || opts.KinesisMock) {
		fmt.Fprintln(os.Stderr, "weir-localaws: nothing to start: takes flags only, and at least one of -kinesis, -dynamodb, -kinesis-mock must be true")
		os.Exit(2)
	}
	if *verbose {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, opts, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "weir-localaws:", err)
		os.Exit(1)
	}
}

// run starts the servers opts asks for, prints their endpoints to out, and
// stops them once ctx is done.
func run(ctx context.Context, opts localaws.Options, out, msgs io.Writer) error {
	if _, err := localaws.Dir(); err != nil {
		// Not in a weir checkout and no WEIR_LOCALAWS_DIR: use the built-in pins.
		dir, err := pinsDir()
		if err != nil {
			return err
		}
		if err := os.Setenv(localaws.EnvDir, dir); err != nil {
			return err
		}
	}
	fmt.Fprintln(msgs, "weir-localaws: starting the servers (installing them with npm on first use)...")
	env, err := localaws.Start(ctx, opts)
	if err != nil {
		return err
	}
	for _, e := range []struct{ name, url string }{
		{localaws.EnvKinesisEndpoint, env.KinesisEndpoint},
		{localaws.EnvDynamoDBEndpoint, env.DynamoDBEndpoint},
		{localaws.EnvKinesisMockEndpoint, env.KinesisMockEndpoint},
	} {
		if e.url != "" {
			fmt.Fprintf(out, "%s=%s\n", e.name, e.url)
		}
	}
	fmt.Fprintf(msgs, "weir-localaws: serving (region %s, any credentials); Ctrl-C stops the servers\n", localaws.Region)
	<-ctx.Done()
	fmt.Fprintln(msgs, "weir-localaws: stopping")
	return env.Close()
}

// pinsDir writes the built-in package.json and package-lock.json to the
// folder weir-localaws of the user's cache directory and returns it. Its
// node_modules is installed there by localaws.Start, and installed again
// when the pins it holds change.
func pinsDir() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no weir checkout here, %s is not set, and no cache folder for the built-in server pins: %w", localaws.EnvDir, err)
	}
	dir := filepath.Join(cache, "weir-localaws")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for name, data := range map[string][]byte{"package.json": packageJSON, "package-lock.json": packageLock} {
		if err := writeIfChanged(filepath.Join(dir, name), data); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// writeIfChanged writes data to path unless path already holds it, so a
// folder already installed from the same pins is left as it is.
func writeIfChanged(path string, data []byte) error {
	old, err := os.ReadFile(path)
	if err == nil && string(old) == string(data) {
		return nil
	}
	// A temporary file renamed over path, so that another weir-localaws
	// starting at the same time never reads a half-written file.
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err = errors.Join(err, f.Close()); err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		_ = os.Remove(f.Name())
	}
	return err
}
