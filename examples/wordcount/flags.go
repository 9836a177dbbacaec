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

// tableName is what DynamoDB accepts as a table name; -app names the lease
// table of the local and kinesis sources.
var tableName = regexp.MustCompile(`^[A-Za-z0-9_.-]{3,255}$`)

// parseFlags parses args (the command line without the program name) into
// options and checks every flag at once. getenv supplies the default of
// -stream. A flag the flag package cannot parse is reported by it, with the
// usage, on stderr; the error returned then is the flag package's own (or
// flag.ErrHelp for -h). Flags that parse but make no sense are reported
// together in one error wrapping errInvalidFlags, one line per problem, each
// naming the flag, its value and the fix; nothing is printed for them.
func parseFlags(args []string, getenv func(string) string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("wordcount", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.source, "source", "", `where lines come from: "local" (local Kinesis servers, the default), "memory" (no servers), or "kinesis" (a real stream; the default when -stream or WEIR_STREAM is set)`)
	fs.StringVar(&o.stream, "stream", getenv("WEIR_STREAM"), "name or ARN of a real Kinesis stream to read (default $WEIR_STREAM)")
	fs.StringVar(&o.endpoint, "endpoint", "", "Kinesis endpoint override for -stream")
	fs.BoolVar(&o.leases, "leases", true, "with -stream: hold shards through a DynamoDB lease table named after -app and checkpoint there (false: read every shard, no checkpoints)")
	fs.StringVar(&o.dynamoEndpoint, "dynamodb-endpoint", "", "DynamoDB endpoint override for the lease table of -stream")
	fs.StringVar(&o.region, "region", "", "AWS region for -stream (default from the AWS environment)")
	fs.StringVar(&o.app, "app", "wordcount", "application name; with -stream it names the DynamoDB lease table, while a local run's table is named after its own stream (3 to 255 letters, digits, '_', '-' or '.')")
	fs.IntVar(&o.shards, "shards", 2, "number of shards of the local stream or the memory source (>= 1)")
	fs.DurationVar(&o.batch, "batch", time.Second, "batch interval (> 0, whole milliseconds)")
	fs.IntVar(&o.rate, "rate", 200, "generated lines per second (>= 10; sent every 100ms, so rounded down to a multiple of 10)")
	fs.IntVar(&o.top, "top", 5, "number of top words printed per batch (>= 0)")
	fs.DurationVar(&o.duration, "duration", 0, "stop (draining) after this long (>= 0); 0 runs until Ctrl-C")
	fs.BoolVar(&o.verbose, "v", false, "log at debug level to stderr")
	fs.StringVar(&o.state, "state", "", `recovery log directory (default "wordcount-state" with -source kinesis, a temporary directory removed at exit otherwise)`)
	fs.StringVar(&o.out, "out", "wordcount-out", "directory of the per-batch count files, written exactly once each (none for a batch without words; the last day kept)")
	o.monitor.register(fs)
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	set := make(map[string]bool)
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if o.source == "" {
		o.source = "local"
		if o.stream != "" {
			o.source = "kinesis"
		}
	}
	problems := o.problems(set)
	if o.monitor.addr != "" {
		if err := o.monitor.checkAddr(); err != nil {
			problems = append(problems, err.Error())
		}
	} else if o.monitor.hosts != "" {
		problems = append(problems, "-http-hosts given without -http: add -http ADDRESS, or drop -http-hosts")
	}
	if fs.NArg() > 0 {
		problems = append(problems, fmt.Sprintf("unexpected argument %q: wordcount takes flags only (see -h)", fs.Arg(0)))
	}
	if len(problems) > 0 {
		return options{}, fmt.Errorf("%w (see -h):\n  %s", errInvalidFlags, strings.Join(problems, "\n  "))
	}
	return o, nil
}

// problems lists what is wrong with o, one entry per problem, each naming the
// flag, its value and the fix. set holds the names of the flags given on the
// command line, so that a flag given for a source that ignores it is
// reported instead of silently having no effect. o.source has its default.
func (o options) problems(set map[string]bool) []string {
	var p []string
	add := func(format string, args ...any) { p = append(p, fmt.Sprintf(format, args...)) }

	kinesisOnly := []string{"endpoint", "dynamodb-endpoint", "region", "leases"}
	generatedOnly := []string{"shards", "rate"} // the sources that generate their own lines
	switch o.source {
	case "local", "memory":
		for _, name := range kinesisOnly {
			if set[name] {
				add("-%s given with -source %s: it applies to -source kinesis only; drop it or read a real stream with -stream NAME", name, o.source)
			}
		}
		if set["stream"] {
			add("-stream %q given with -source %s: drop -source to read that stream, or drop -stream", o.stream, o.source)
		}
	case "kinesis":
		if o.stream == "" {
			add("-source kinesis without -stream: name the stream with -stream NAME (or WEIR_STREAM)")
		}
		for _, name := range generatedOnly {
			if set[name] {
				add("-%s given with -source kinesis: a real stream has its own shards and producers; drop it", name)
			}
		}
	default:
		add(`-source %q: must be "local", "memory" or "kinesis"`, o.source)
	}
	for _, e := range []struct{ name, value string }{{"endpoint", o.endpoint}, {"dynamodb-endpoint", o.dynamoEndpoint}} {
		if e.value == "" {
			continue
		}
		if u, err := url.Parse(e.value); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			add("-%s %q: must be an http or https URL such as http://127.0.0.1:4567", e.name, e.value)
		}
	}
	if !tableName.MatchString(o.app) {
		add("-app %q: must be 3 to 255 letters, digits, '_', '-' or '.' (it names the DynamoDB lease table), such as \"wordcount\"", o.app)
	}
	if o.shards < 1 {
		add("-shards %d: must be >= 1", o.shards)
	}
	switch {
	case o.batch <= 0:
		add("-batch %v: must be > 0, such as 1s", o.batch)
	case o.batch%time.Millisecond != 0:
		add("-batch %v: must be a whole number of milliseconds, such as %v", o.batch, o.batch.Truncate(time.Millisecond)+time.Millisecond)
	}
	if o.rate < 10 {
		add("-rate %d: must be >= 10 lines per second (lines go out every 100ms, rate/10 at a time)", o.rate)
	}
	if o.top < 0 {
		add("-top %d: must be >= 0 (0 prints no words)", o.top)
	}
	if o.duration < 0 {
		add("-duration %v: must be >= 0 (0 runs until Ctrl-C)", o.duration)
	}
	if o.out == "" {
		add(`-out "": name the directory for the per-batch count files`)
	}
	return p
}
