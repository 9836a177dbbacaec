// Command weir is the operator's tool of a weir pipeline. Its deadletters
// commands list the records an output quarantined (stream.Quarantine) into a
// directory (package sink/deadletter) or a DynamoDB table (package
// sink/deadletter/dynamodb), and put chosen ones back into a Kinesis
// stream, each exactly once:
//
//	weir deadletters list -dir dead-letters
//	weir deadletters list -table dead-letters
//	weir deadletters replay -dir dead-letters -stream orders -id 1700000000000-0-3
//	weir deadletters replay -dir dead-letters -stream orders -all
//	weir deadletters replay -table dead-letters -stream orders -all
//
// The table's DynamoDB endpoint is -table-endpoint (list also takes
// -endpoint for it, as it did first); replay's -endpoint is Kinesis's, and
// replay refuses it with -table but without -table-endpoint. With -dir, list takes
// none of -endpoint, -table-endpoint and -region (it calls no AWS service),
// and replay no -table-endpoint: given, they are refused.
//
// A letter of a directory is named <batch time>-<output>-<index>, one of a
// table by its item's key, <batch>-<index> (see sink/deadletter/dynamodb's
// Table). Replay puts a letter's record as it was read (a kinesis.Record's
// Data, PartitionKey and ExplicitHashKey; a letter of []byte or string
// records gets its ID as partition key) and records, in the directory's replays.jsonl (or the
// letter's item, attribute "replay", by a conditional UpdateItem), that it
// is about to put it and then that it did, each durably; a letter done is
// never put again, and one a crash left between the two is looked for in
// the stream before it is put again. A table's letter being put is claimed
// by the run putting it, for a few minutes at a time that the run renews:
// another run at the same time leaves it to that run, and says so (its
// exit status is then 1), and takes it over only once the claim ran out.
// See DESIGN.md, Failure model.
//
// AWS credentials and region come from the environment, as for any AWS SDK
// program; -endpoint and -region override them (for a local server).
//
// The exit status is 0 on success (and for -h), 2 for a command line weir
// does not understand, 1 for any other failure, whose error is printed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/weirstream/weir/clock"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Once the first signal is caught, the next is no longer: a second
	// Ctrl-C stops the command at once.
	context.AfterFunc(ctx, stop)
	if err := run(ctx, os.Args[1:], os.Stdout, awsKinesis); err != nil {
		fmt.Fprintln(os.Stderr, "weir:", err)
		os.Exit(exitCode(err))
	}
}

// exitCode is the exit status of run's outcome err: 0 for none, 2 for a
// command line the tool does not understand (wrapping errUsage), as the
// flag package's, 1 for any other failure.
func exitCode(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUsage):
		return 2
	}
	return 1
}

// errUsage is returned for a command line the tool does not understand.
var errUsage = errors.New(`usage:
  weir deadletters list (-dir DIR | -table TABLE [-table-endpoint URL] [-region REGION])
  weir deadletters replay (-dir DIR | -table TABLE [-table-endpoint URL]) -stream STREAM (-id ID ... | -all) [-endpoint URL] [-region REGION]`)

// clientFunc makes the Kinesis client of a replay.
type clientFunc func(ctx context.Context, endpoint, region string) (*kinesis.Client, error)

// awsKinesis is a client configured as the AWS SDK's default chain says,
// with endpoint and region, if given, instead.
func awsKinesis(ctx context.Context, endpoint, region string) (*kinesis.Client, error) {
	cfg, err := awsConfig(ctx, endpoint, region)
	if err != nil {
		return nil, err
	}
	return kinesis.NewFromConfig(cfg, func(o *kinesis.Options) {
		if endpoint != "" {
			o.BaseEndpoint = &endpoint
		}
	}), nil
}

// awsConfig is the AWS SDK's default configuration, with region if given;
// without a region from either, an error naming the fix unless endpoint is
// set (the SDK's own, at the first call, says only "Missing Region").
func awsConfig(ctx context.Context, endpoint, region string) (aws.Config, error) {
	var opts []func(*config.LoadOptions) error
	if region != "" {
		opts = append(opts, config.WithRegion(region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("AWS configuration: %w", err)
	}
	if cfg.Region == "" && endpoint == "" && cfg.BaseEndpoint == nil { // AWS_ENDPOINT_URL sets BaseEndpoint
		return aws.Config{}, errors.New("no AWS region: pass -region, or set AWS_REGION (or the region in the shared AWS config file)")
	}
	// The SDK's default HTTP client bounds the dial, not the answer: an
	// endpoint that takes the connection and never answers would hold
	// the command for ever. Each attempt is bounded instead (the SDK
	// retries it as any failed attempt).
	cfg.HTTPClient = awshttp.NewBuildableClient().WithTimeout(attemptTimeout)
	return cfg, nil
}

// attemptTimeout bounds each attempt of every AWS call; tests shorten it.
var attemptTimeout = 30 * time.Second

// run runs the command line args, writing its report, or the help asked
// for, to out.
func run(ctx context.Context, args []string, out io.Writer, client clientFunc) error {
	help := []string{"-h", "-help", "--help", "help"}
	if len(args) == 1 && slices.Contains(help, args[0]) || len(args) == 2 && args[0] == "deadletters" && slices.Contains(help, args[1]) {
		fmt.Fprintln(out, errUsage)
		return nil
	}
	if len(args) < 2 || args[0] != "deadletters" {
		return errUsage
	}
	fs := flag.NewFlagSet("weir deadletters "+args[1], flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	dir := fs.String("dir", "", "the dead-letter directory (or -table)")
	var (
		streamName, endpoint, region, table, tableEndpoint *string
		ids                                                *idFlags
		all                                                *bool
	)
	switch args[1] {
	case "list":
		table = fs.String("table", "", "the dead-letter DynamoDB table, instead of -dir")
		// -table-endpoint as replay names it; -endpoint as earlier
		// versions did.
		tableEndpoint = fs.String("table-endpoint", "", "the DynamoDB endpoint of -table (default: the AWS SDK's)")
		endpoint = fs.String("endpoint", "", "the same as -table-endpoint")
		region = fs.String("region", "", "the AWS region (default: the AWS SDK's)")
	case "replay":
		table = fs.String("table", "", "the dead-letter DynamoDB table, instead of -dir")
		tableEndpoint = fs.String("table-endpoint", "", "the DynamoDB endpoint of -table (default: the AWS SDK's)")
		streamName = fs.String("stream", "", "the Kinesis stream to put the records into (required)")
		ids = &idFlags{}
		fs.Var(ids, "id", "a letter to replay (repeatable)")
		all = fs.Bool("all", false, "replay every letter not replayed yet")
		endpoint = fs.String("endpoint", "", "the Kinesis endpoint (default: the AWS SDK's)")
		region = fs.String("region", "", "the AWS region (default: the AWS SDK's)")
	default:
		return errUsage
	}
	err := fs.Parse(args[2:])
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(out, errUsage)
		fs.SetOutput(out)
		fs.PrintDefaults()
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w\n%w", err, errUsage)
	}
	if fs.NArg() > 0 {
		return errUsage
	}
	hasTable := *table != ""
	if *dir != "" && !hasTable {
		if err := tableOnly(fs, args[1]); err != nil {
			return fmt.Errorf("%w\n%w", err, errUsage)
		}
	}
	switch {
	case hasTable && *dir != "":
		return fmt.Errorf("-dir and -table both given: choose one store\n%w", errUsage)
	case !hasTable && *dir == "":
		return errUsage
	case args[1] == "list" && hasTable:
		e := *tableEndpoint
		switch {
		case e == "":
			e = *endpoint
		case *endpoint != "" && *endpoint != e:
			return fmt.Errorf("-endpoint %s and -table-endpoint %s differ: list reads the table only; give one\n%w", *endpoint, e, errUsage)
		}
		c, err := dynamoDB(ctx, e, *region)
		if err != nil {
			return err
		}
		return listTable(ctx, tableStore{c: c, table: *table}, out)
	case args[1] == "list":
		return list(*dir, out)
	}
	switch {
	case *streamName == "":
		return fmt.Errorf("-stream missing: name the stream to put the records into\n%w", errUsage)
	case len(*ids) == 0 && !*all, len(*ids) > 0 && *all:
		return fmt.Errorf("choose the letters: -id ID (repeatable) or -all\n%w", errUsage)
	}
	// The Kinesis client is made once there are letters to put: a
	// mistyped directory, or one without letters, is said so first.
	kc := func() (*kinesis.Client, error) { return client(ctx, *endpoint, *region) }
	if hasTable {
		if *endpoint != "" && *tableEndpoint == "" {
			// list's -endpoint is the table's: an operator who means it
			// for the table too would send the table's calls, with the
			// environment's credentials, to AWS. Refused, not noted.
			return fmt.Errorf("-endpoint %s is Kinesis's, and the table would be read at the AWS SDK's DynamoDB endpoint: "+
				"give the table's with -table-endpoint (the AWS one is https://dynamodb.<region>.amazonaws.com)\n%w", *endpoint, errUsage)
		}
		dc, err := dynamoDB(ctx, *tableEndpoint, *region)
		if err != nil {
			return err
		}
		return replayTable(ctx, kc, clock.Real{}, tableStore{c: dc, table: *table}, *streamName, *ids, out)
	}
	return replay(ctx, kc, clock.Real{}, *dir, *streamName, *ids, out)
}

// tableOnly returns an error naming each flag of fs given with -dir that
// applies to -table only, for command cmd ("list" or "replay"): a flag that
// cannot apply is refused rather than ignored, as its user meant it to do
// something. Nil if there is none.
func tableOnly(fs *flag.FlagSet, cmd string) error {
	var problems []error
	fs.Visit(func(f *flag.Flag) {
		switch {
		case f.Value.String() == "": // given empty, as a script may: nothing is ignored
		case f.Name == "table-endpoint":
			problems = append(problems, fmt.Errorf("-table-endpoint %s given with -dir: it is the DynamoDB endpoint of -table, and a directory is read as files; drop it", f.Value))
		case cmd == "list" && (f.Name == "endpoint" || f.Name == "region"):
			problems = append(problems, fmt.Errorf("-%s %s given with -dir: list -dir reads files and calls no AWS service (-%s applies to -table); drop it", f.Name, f.Value, f.Name))
		}
	})
	return errors.Join(problems...)
}

// idFlags is a repeatable -id flag.
type idFlags []string

func (f *idFlags) String() string { return strings.Join(*f, ",") }

func (f *idFlags) Set(v string) error {
	if !slices.Contains(*f, v) {
		*f = append(*f, v)
	}
	return nil
}

// list prints the letters of dir, one a line, with what replay did.
func list(dir string, out io.Writer) error {
	ls, err := dirLetters(dir)
	if err != nil {
		return err
	}
	done, err := readJournal(dir)
	if err != nil {
		return err
	}
	return printLetters(ls, done, out)
}

// printLetters prints letters, one a line, with what replay did (done).
func printLetters(ls []letter, done map[string]journalEntry, out io.Writer) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tBATCH\tOUTPUT\tSHARD\tFIRST\tOFFSET\tREPLAYED\tERROR")
	for _, l := range ls {
		id := l.id
		replayed := "no"
		if e, ok := stateOf(done, l); ok {
			replayed = e.State
			switch {
			case e.State == stateDone:
				replayed = "to " + e.Stream + " " + e.Shard + " " + e.Seq
			case e.State == statePutting && e.Owner != "" && !e.Until.IsZero():
				// A claim: the run and the end of its claim (which
				// list cannot tell ran out or not).
				replayed = "putting (run " + e.Owner + ", claim until " + e.Until.UTC().Format(time.RFC3339) + ")"
			}
		}
		errText, _, _ := strings.Cut(l.Err, "\n")
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%q\n", id, l.Time, l.OutputName, l.Range.Shard, l.Range.First, l.Offset, replayed, errText)
	}
	return w.Flush()
}
