package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// errInvalidFlags wraps the problems parseFlags found in flags that parsed.
var errInvalidFlags = errors.New("invalid flags")

// defaultApp is -app's default.
const defaultApp = "fleetcount"

// names are what both Kinesis and DynamoDB accept in a name: -app names the
// lease tables and the intermediate stream, so it is kept short enough for
// "<app>-by-key.leases".
var (
	appName   = regexp.MustCompile(`^[A-Za-z0-9_.-]{3,100}$`)
	tableName = regexp.MustCompile(`^[A-Za-z0-9_.-]{3,255}$`)
)

// parseFlags parses args (the command line without the program name) into
// options and checks every flag at once. A flag the flag package cannot
// parse is reported by it, with the usage, on stderr, and its error is
// returned (flag.ErrHelp for -h). Flags that parse but make no sense are
// reported together in one error wrapping errInvalidFlags, one line per
// problem, each naming the flag, its value and the fix.
func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("fleetcount", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.stream, "stream", "", "Kinesis stream to count (default: none, a demo on local servers started for the run)")
	fs.StringVar(&o.app, "app", defaultApp, "application name, the same on every worker: it names the lease tables and the intermediate stream <app>-by-key (3 to 100 letters, digits, '_', '-' or '.'; in the demo, by default, the name of the demo's stream)")
	fs.StringVar(&o.table, "table", "", "DynamoDB table of the counts, created if missing (default <app>-counts)")
	fs.StringVar(&o.kinesisEndpoint, "kinesis-endpoint", "", "Kinesis endpoint override, such as http://127.0.0.1:4567 for local servers")
	fs.StringVar(&o.dynamoEndpoint, "dynamodb-endpoint", "", "DynamoDB endpoint override, such as http://127.0.0.1:4568 for local servers")
	fs.StringVar(&o.region, "region", "", "AWS region (default from the AWS environment)")
	fs.StringVar(&o.state, "state", "", `this worker's state directory, its own and kept across restarts: its name and lease state (default "fleetcount-state" with -stream, a temporary directory otherwise)`)
	fs.StringVar(&o.worker, "worker", "", "this worker's name, stable across restarts and unique in the fleet (default: one made up once and kept in -state)")
	fs.IntVar(&o.repartitionShards, "repartition-shards", 4, "shards of the intermediate stream <app>-by-key when this worker creates it (>= 1)")
	fs.IntVar(&o.shards, "shards", 0, "with -kinesis-endpoint: create -stream with this many shards if it is missing (default 0: it must exist; 4 in the demo)")
	fs.IntVar(&o.put, "put", 0, "put this many demo records on -stream first (keys key-00 to key-15; default 0, 1000 in the demo)")
	fs.DurationVar(&o.batch, "batch", time.Second, "batch interval (> 0, whole milliseconds)")
	fs.DurationVar(&o.checkpoint, "checkpoint", 0, "how often shard positions are checkpointed in the lease tables (default 0: weir's, a minute)")
	fs.DurationVar(&o.leaseDuration, "lease-duration", 0, "how long a dead worker's leases wait before another worker takes them (default 0: weir's, 10s)")
	fs.BoolVar(&o.verbose, "v", false, "log at debug level to stderr")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	set := make(map[string]bool)
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	problems := o.problems(set)
	if fs.NArg() > 0 {
		problems = append(problems, fmt.Sprintf("unexpected argument %q: fleetcount takes flags only (see -h)", fs.Arg(0)))
	}
	if len(problems) > 0 {
		return options{}, fmt.Errorf("%w (see -h):\n  %s", errInvalidFlags, strings.Join(problems, "\n  "))
	}
	if o.table == "" {
		o.table = o.app + "-counts"
	}
	return o, nil
}

// problems lists what is wrong with o, one entry per problem, each naming the
// flag, its value and the fix. set holds the flags given on the command line.
func (o options) problems(set map[string]bool) []string {
	var p []string
	add := func(format string, args ...any) { p = append(p, fmt.Sprintf(format, args...)) }
	if o.stream == "" {
		for _, name := range []string{"kinesis-endpoint", "dynamodb-endpoint", "region", "shards"} {
			if set[name] {
				add("-%s given without -stream: name the stream to count with -stream NAME, or drop -%s for the demo", name, name)
			}
		}
	}
	for _, e := range []struct{ name, value string }{{"kinesis-endpoint", o.kinesisEndpoint}, {"dynamodb-endpoint", o.dynamoEndpoint}} {
		if e.value == "" {
			continue
		}
		if u, err := url.Parse(e.value); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			add("-%s %q: must be an http or https URL such as http://127.0.0.1:4567", e.name, e.value)
		}
	}
	if !appName.MatchString(o.app) {
		add(`-app %q: must be 3 to 100 letters, digits, '_', '-' or '.', such as "fleetcount"`, o.app)
	}
	if o.table != "" && !tableName.MatchString(o.table) {
		add(`-table %q: must be 3 to 255 letters, digits, '_', '-' or '.', such as "fleetcount-counts"`, o.table)
	}
	if o.repartitionShards < 1 {
		add("-repartition-shards %d: must be >= 1", o.repartitionShards)
	}
	switch {
	case o.shards < 0:
		add("-shards %d: must be >= 0", o.shards)
	case o.shards > 0 && o.stream != "" && o.kinesisEndpoint == "":
		add("-shards %d with a stream on AWS: create the stream with the AWS console or CLI, or point -kinesis-endpoint at local servers", o.shards)
	}
	if o.put < 0 {
		add("-put %d: must be >= 0", o.put)
	}
	switch {
	case o.batch <= 0:
		add("-batch %v: must be > 0, such as 1s", o.batch)
	case o.batch%time.Millisecond != 0:
		add("-batch %v: must be a whole number of milliseconds, such as %v", o.batch, o.batch.Truncate(time.Millisecond)+time.Millisecond)
	}
	if o.checkpoint < 0 {
		add("-checkpoint %v: must be >= 0 (0 for weir's default)", o.checkpoint)
	}
	if o.leaseDuration < 0 {
		add("-lease-duration %v: must be >= 0 (0 for weir's default)", o.leaseDuration)
	}
	if strings.ContainsAny(o.worker, "\n\r") || len(o.worker) > 128 {
		add("-worker %q: must be one line of at most 128 bytes", o.worker)
	}
	return p
}
