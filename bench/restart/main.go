// Command restart measures how long a worker restarted after kill -9 takes
// to deliver again: from the restart to the first batch output holding a
// record put after the kill, and to the moment every shard delivered one.
//
//	go run ./bench/restart            # 4 shards, 5 restarts per mode
//	go run ./bench/restart -runs 3 -shards 8
//
// It starts kinesalite and dynalite on 127.0.0.1, creates a stream, and
// puts a record every 20ms. A child process (this program with -child)
// runs a pipeline with weir's defaults (batch interval 1s, lease duration
// 10s, a fresh worker ID per process) and a directory recovery log; it
// prints one line per batch. The parent waits for the child's first
// output, lets it run -warm, kills it with SIGKILL, starts it again on
// the same recovery log, and times the first output holding a record put
// after the kill. Two modes alternate, on recovery logs of their own:
//
//   - statedir: Leases.StateDir set to the same folder beside the recovery
//     log for every process: the restarted worker takes its predecessor's
//     leases at once;
//   - baseline: the default, no Leases.StateDir, so the restarted worker
//     knows no predecessor and waits for its leases to expire (weir before
//     StateDir, and the KCL).
//
// Medians of each mode and their ratio are printed, for the first output
// and for the moment every shard delivered again: the measure that
// matters, since a baseline worker that believes its predecessor alive
// steals one lease from it at once (balancing) and waits for the others.
// Wall-clock times on a shared machine: run it more than once.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/weirstream/weir/internal/localaws"
)

// options are the command-line settings.
type options struct {
	shards  int
	runs    int
	warm    time.Duration
	child   bool
	verbose bool
	// child settings
	stream, table, kinesisEndpoint, dynamoEndpoint, recoveryDir, stateDir string
}

func main() {
	var o options
	flag.IntVar(&o.shards, "shards", 4, "number of shards")
	flag.IntVar(&o.runs, "runs", 5, "restarts per mode (alternated); medians are reported")
	flag.DurationVar(&o.warm, "warm", 3*time.Second, "how long a worker runs after its first output before it is killed")
	flag.BoolVar(&o.child, "child", false, "run the worker (internal)")
	flag.BoolVar(&o.verbose, "v", false, "workers log to stderr")
	flag.StringVar(&o.stream, "stream", "", "stream (child)")
	flag.StringVar(&o.table, "table", "", "lease table (child)")
	flag.StringVar(&o.kinesisEndpoint, "kinesis", "", "Kinesis endpoint (child)")
	flag.StringVar(&o.dynamoEndpoint, "dynamodb", "", "DynamoDB endpoint (child)")
	flag.StringVar(&o.recoveryDir, "recovery", "", "recovery log directory (child)")
	flag.StringVar(&o.stateDir, "statedir", "", "Leases.StateDir (child); empty: none, the default")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var err error
	if o.child {
		err = runChild(ctx, o, os.Stdout)
	} else {
		err = run(ctx, o, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "restart:", err)
		os.Exit(1)
	}
}

// run is the parent: servers, stream, producer, and the kill/restart
// cycles of both modes.
func run(ctx context.Context, o options, out io.Writer) error {
	if o.runs < 1 || o.shards < 1 || o.warm < 0 {
		return fmt.Errorf("-runs %d, -shards %d, -warm %v: -runs and -shards must be >= 1, -warm >= 0", o.runs, o.shards, o.warm)
	}
	env, err := localaws.Start(ctx, localaws.Options{Kinesis: true, DynamoDB: true})
	if err != nil {
		return err
	}
	defer env.Close()
	name := "restart-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if err := env.CreateStream(ctx, name, o.shards); err != nil {
		return err
	}
	prodCtx, stopProducing := context.WithCancel(ctx)
	defer stopProducing()
	go produce(prodCtx, env, name)

	self, err := os.Executable()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "weir-restart-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	modes := []string{"statedir", "baseline"}
	first := map[string][]time.Duration{}
	all := map[string][]time.Duration{}
	for i := range o.runs {
		for _, mode := range modes {
			w := worker{
				self: self, mode: mode, tmp: tmp,
				args: []string{"-child", "-v=" + strconv.FormatBool(o.verbose), "-stream", name, "-table", name + "-" + mode,
					"-kinesis", env.KinesisEndpoint, "-dynamodb", env.DynamoDBEndpoint, "-recovery", filepath.Join(tmp, mode+"-log")},
			}
			f, a, err := w.killAndRestart(ctx, o.shards, o.warm)
			if err != nil {
				return fmt.Errorf("%s, run %d: %w", mode, i+1, err)
			}
			first[mode] = append(first[mode], f)
			all[mode] = append(all[mode], a)
			fmt.Fprintf(out, "%-8s run %d: first output %v, every shard %v after the restart\n", mode, i+1, f.Round(time.Millisecond), a.Round(time.Millisecond))
		}
	}
	for _, mode := range modes {
		fmt.Fprintf(out, "%-8s medians of %d: first output %v, every shard %v\n", mode, o.runs,
			median(first[mode]).Round(time.Millisecond), median(all[mode]).Round(time.Millisecond))
	}
	fmt.Fprintf(out, "statedir/baseline: first output %.2f, every shard %.2f\n",
		float64(median(first["statedir"]))/float64(median(first["baseline"])),
		float64(median(all["statedir"]))/float64(median(all["baseline"])))
	return nil
}

// produce puts a record every 20ms whose payload is its put time.
func produce(ctx context.Context, env *localaws.Env, stream string) {
	client := env.Kinesis()
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		data := [][]byte{[]byte(strconv.FormatInt(time.Now().UnixNano(), 10))}
		_ = localaws.PutRecordsOn(ctx, client, stream, data, func(int) string { return strconv.Itoa(i) })
	}
}

// worker runs the child process of one mode.
type worker struct {
	self, mode, tmp string
	args            []string
}

// output is one line of the child: the newest put time of the records of
// a shard in a batch.
type output struct {
	shard string
	put   int64
}

// start starts the child and returns its output lines.
func (w *worker) start(ctx context.Context) (*exec.Cmd, <-chan output, error) {
	args := slices.Clone(w.args)
	if w.mode == "statedir" {
		args = append(args, "-statedir", filepath.Join(w.tmp, "statedir-leases"))
	}
	cmd := exec.CommandContext(ctx, w.self, args...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	lines := make(chan output, 1024)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) != 3 || f[0] != "batch" {
				continue
			}
			if n, err := strconv.ParseInt(f[2], 10, 64); err == nil {
				select {
				case lines <- output{shard: f[1], put: n}:
				default:
				}
			}
		}
	}()
	return cmd, lines, nil
}

// killAndRestart runs the child until every shard delivered and -warm
// more, kills it, starts it again and returns the times from that start to
// its first output of a record put after the kill, and to the moment every
// shard had delivered one.
func (w *worker) killAndRestart(ctx context.Context, shards int, warm time.Duration) (first, all time.Duration, err error) {
	cmd, lines, err := w.start(ctx)
	if err != nil {
		return 0, 0, err
	}
	if _, _, err := afterKill(ctx, lines, 0, shards, time.Minute); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return 0, 0, fmt.Errorf("first run: %w", err)
	}
	time.Sleep(warm)
	killed := time.Now()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return 0, 0, err
	}
	cmd.Wait()
	restarted := time.Now()
	cmd, lines, err = w.start(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
	}()
	f, a, err := afterKill(ctx, lines, killed.UnixNano(), shards, time.Minute)
	if err != nil {
		return 0, 0, fmt.Errorf("after the restart: %w", err)
	}
	return f.Sub(restarted), a.Sub(restarted), nil
}

// afterKill returns when the first output of a record put after after
// arrived, and when every one of shards shards had one.
func afterKill(ctx context.Context, lines <-chan output, after int64, shards int, limit time.Duration) (first, all time.Time, err error) {
	guard := time.NewTimer(limit)
	defer guard.Stop()
	seen := map[string]bool{}
	for len(seen) < shards {
		select {
		case o, ok := <-lines:
			if !ok {
				return first, all, errors.New("the worker exited")
			}
			if o.put <= after {
				continue
			}
			if first.IsZero() {
				first = time.Now()
			}
			seen[o.shard] = true
		case <-guard.C:
			return first, all, fmt.Errorf("%d of %d shards delivered within %v", len(seen), shards, limit)
		case <-ctx.Done():
			return first, all, ctx.Err()
		}
	}
	return first, time.Now(), nil
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}
