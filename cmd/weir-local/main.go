// Command weir-local starts local AWS servers on 127.0.0.1 for developing and
// testing a weir application without an AWS account: kinesalite (Kinesis)
// and dynalite (DynamoDB) by default, kinesis-mock on request. It installs
// them on first use (Node.js 20+ and npm needed; see package
// github.com/weirstream/weir/localaws), optionally creates streams, prints
// their endpoints as shell assignments, and runs until Ctrl-C or SIGTERM.
//
//	go run github.com/weirstream/weir/cmd/weir-local -stream words:2
//	# export WEIR_KINESIS_ENDPOINT=http://127.0.0.1:41234 ...
//
// Point an application at the endpoints (kinesis.Config.Endpoint,
// leasetable.Config.Endpoint) with the printed region and static
// credentials; weir's tests and localaws.Start use servers named by the
// WEIR_*_ENDPOINT variables instead of starting their own. weir-local itself
// ignores those variables (saying so): it always starts its own servers.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/weirstream/weir/localaws"
)

// streamFlags is a repeatable -stream NAME[:SHARDS] flag.
type streamFlags []streamSpec

type streamSpec struct {
	name   string
	shards int
}

func (s *streamFlags) String() string {
	var parts []string
	for _, sp := range *s {
		parts = append(parts, sp.name+":"+strconv.Itoa(sp.shards))
	}
	return strings.Join(parts, ",")
}

func (s *streamFlags) Set(v string) error {
	name, n, found := strings.Cut(v, ":")
	spec := streamSpec{name: name, shards: 1}
	if found {
		shards, err := strconv.Atoi(n)
		if err != nil || shards < 1 {
			return fmt.Errorf("%q: shards must be a whole number >= 1, as in words:2", v)
		}
		spec.shards = shards
	}
	if name == "" {
		return fmt.Errorf("%q: name the stream, as in words:2", v)
	}
	*s = append(*s, spec)
	return nil
}

type options struct {
	opts    localaws.Options
	streams streamFlags
}

func main() {
	var o options
	flag.BoolVar(&o.opts.Kinesis, "kinesis", true, "start kinesalite (Kinesis)")
	flag.BoolVar(&o.opts.DynamoDB, "dynamodb", true, "start dynalite (DynamoDB: lease tables, recovery logs)")
	flag.BoolVar(&o.opts.KinesisMock, "kinesis-mock", false, "also start kinesis-mock (UpdateShardCount, enhanced fan-out; slower)")
	flag.StringVar(&o.opts.DataDir, "data", "", "keep the servers' data in this directory across runs (default: in memory)")
	flag.StringVar(&o.opts.Dir, "dir", "", "folder holding package.json to install the npm packages in (default: the weir checkout around the working directory, else the user cache directory)")
	flag.Var(&o.streams, "stream", "create a stream on kinesalite, NAME or NAME:SHARDS (one kept in -data by an earlier run is used as it is); repeatable")
	verbose := flag.Bool("v", false, "log the servers' start and stop")
	flag.Parse()
	if flag.NArg() > 0 {
		// Flags only: a stream named without -stream would not be made.
		fmt.Fprintf(os.Stderr, "weir-local: unexpected argument %q: it takes flags only (a stream is -stream NAME:SHARDS); see weir-local -h\n", flag.Arg(0))
		os.Exit(2)
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelDebug
	}
	o.opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Once the first signal is caught, the next is no longer: a second
	// Ctrl-C stops the command at once.
	context.AfterFunc(ctx, stop)
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "weir-local:", err)
		os.Exit(1)
	}
}

// run starts the servers, creates the streams, prints the endpoints and
// waits until ctx is done; then it stops the servers.
func run(ctx context.Context, o options, out io.Writer) (err error) {
	if o.opts.DataDir != "" {
		if o.opts.DataDir, err = filepath.Abs(o.opts.DataDir); err != nil {
			return err
		}
	}
	if !o.opts.Kinesis && !o.opts.DynamoDB && !o.opts.KinesisMock {
		return errors.New("nothing to start: -kinesis, -dynamodb and -kinesis-mock are all false; leave one on")
	}
	if len(o.streams) > 0 && !o.opts.Kinesis {
		return errors.New("-stream needs -kinesis")
	}
	// localaws.Start uses a server named in the environment instead of
	// starting one: in a shell holding an earlier run's export lines, this
	// command would start nothing and print a stale endpoint again.
	for _, name := range []string{localaws.EnvKinesisEndpoint, localaws.EnvDynamoDBEndpoint, localaws.EnvKinesisMockEndpoint} {
		if v, ok := os.LookupEnv(name); ok {
			fmt.Fprintf(out, "# ignoring %s=%s from the environment: weir-local starts servers of its own\n", name, v)
			if err := os.Unsetenv(name); err != nil {
				return err
			}
		}
	}
	fmt.Fprintln(out, "# starting local AWS servers on 127.0.0.1 (installing them with npm on first use)...")
	env, err := localaws.Start(ctx, o.opts)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := env.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	for _, s := range o.streams {
		err := env.CreateStream(ctx, s.name, s.shards)
		var exists *types.ResourceInUseException
		if errors.As(err, &exists) && o.opts.DataDir != "" {
			// Made by an earlier run on the same -data: use it.
			err = keptStream(ctx, env, s, o.opts.DataDir)
			if err == nil {
				fmt.Fprintf(out, "# stream %s: %d shard(s), kept in -data\n", s.name, s.shards)
				continue
			}
		}
		if err != nil {
			return fmt.Errorf("creating stream %s: %w", s.name, err)
		}
		fmt.Fprintf(out, "# stream %s: %d shard(s)\n", s.name, s.shards)
	}
	printEnv(out, env)
	fmt.Fprintln(out, "# running; Ctrl-C stops the servers")
	<-ctx.Done()
	return nil
}

// keptStream checks that stream s, which an earlier run made in the -data
// directory data, has the shards asked for.
func keptStream(ctx context.Context, env *localaws.Env, s streamSpec, data string) error {
	res, err := env.Kinesis().DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(s.name)})
	if err != nil {
		return err
	}
	if n := int(aws.ToInt32(res.StreamDescriptionSummary.OpenShardCount)); n != s.shards {
		return fmt.Errorf("it is kept in -data %s and has %d shard(s), not %d: ask for -stream %s:%d, or another name or -data directory",
			data, n, s.shards, s.name, n)
	}
	return nil
}

// printEnv writes the endpoints and credentials as shell assignments.
func printEnv(out io.Writer, env *localaws.Env) {
	for _, kv := range [][2]string{
		{localaws.EnvKinesisEndpoint, env.KinesisEndpoint},
		{localaws.EnvDynamoDBEndpoint, env.DynamoDBEndpoint},
		{localaws.EnvKinesisMockEndpoint, env.KinesisMockEndpoint},
	} {
		if kv[1] != "" {
			fmt.Fprintf(out, "export %s=%s\n", kv[0], kv[1])
		}
	}
	creds, err := env.AWSConfig().Credentials.Retrieve(context.Background())
	if err == nil {
		fmt.Fprintf(out, "export AWS_REGION=%s AWS_ACCESS_KEY_ID=%s AWS_SECRET_ACCESS_KEY=%s\n", localaws.Region, creds.AccessKeyID, creds.SecretAccessKey)
	}
}
