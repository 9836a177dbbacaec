//go:build unix

package crashtest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/weirstream/weir/recovery/dynamolog"

	"github.com/weirstream/weir/internal/localaws"
	"github.com/weirstream/weir/recovery"
)

// Environment of a child process: the test binary re-executed with
// envChild set runs the pipeline (childMain) instead of the tests. The
// endpoints come in localaws's own variables (WEIR_KINESIS_ENDPOINT,
// WEIR_DYNAMODB_ENDPOINT), so the child starts no server.
const (
	envChild  = "WEIR_CRASHTEST_CHILD"  // "1" in a child
	envStream = "WEIR_CRASHTEST_STREAM" // the stream
	envTable  = "WEIR_CRASHTEST_TABLE"  // the lease table
	envLog    = "WEIR_CRASHTEST_LOG"    // the recovery log directory
	envOut    = "WEIR_CRASHTEST_OUT"    // the output file
	envSlow   = "WEIR_CRASHTEST_SLOW"   // the output's pause, a Go duration
	envShared = "WEIR_CRASHTEST_SHARED" // "1": a DynamoDB recovery log
	// The fields of childTuning, "" for the default: the worker ID, and
	// Go durations.
	envWorker     = "WEIR_CRASHTEST_WORKER"
	envPoll       = "WEIR_CRASHTEST_POLL"
	envAttempt    = "WEIR_CRASHTEST_ATTEMPT"
	envCheckpoint = "WEIR_CRASHTEST_CHECKPOINT"
)

// env returns tn as a child's environment.
func (tn childTuning) env() []string {
	d := func(v time.Duration) string {
		if v == 0 {
			return ""
		}
		return v.String()
	}
	return []string{envWorker + "=" + tn.worker, envPoll + "=" + d(tn.poll),
		envAttempt + "=" + d(tn.attempt), envCheckpoint + "=" + d(tn.checkpoint)}
}

// tuningFromEnv reads a child's tuning from its environment.
func tuningFromEnv() (childTuning, error) {
	tn := childTuning{worker: os.Getenv(envWorker)}
	var errs []error
	for name, v := range map[string]*time.Duration{envPoll: &tn.poll, envAttempt: &tn.attempt, envCheckpoint: &tn.checkpoint} {
		if s := os.Getenv(name); s != "" {
			d, err := time.ParseDuration(s)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
			}
			*v = d
		}
	}
	return tn, errors.Join(errs...)
}

// servers are the local servers of the in-process tests; the torture test
// starts its own, with data directories.
var servers = localaws.NewShared(localaws.Options{Kinesis: true, DynamoDB: true})

func TestMain(m *testing.M) {
	if os.Getenv(envChild) == "1" {
		os.Exit(childMain())
	}
	os.Exit(servers.Run(m))
}

// logOpener returns the recovery log of the torture pipeline: a directory
// log in dir, or, if shared, a DynamoDB log in the table named after the
// lease table (with which the receiver must still checkpoint completed
// records only), named after the worker (as childTuning.worker: "" for
// workerID), its calls' attempts bounded by attempt (0: the default).
func logOpener(env *localaws.Env, shared bool, dir, table, worker string, attempt time.Duration, logger *slog.Logger) recovery.Opener {
	if shared {
		return dynamolog.Config{Client: env.DynamoDB(), Table: table + "-log", Name: cmp.Or(worker, workerID), AttemptTimeout: attempt, Logger: logger}
	}
	return recovery.DirConfig{Path: dir, Logger: logger}
}

// childMain runs the pipeline until SIGTERM, then drains it: exit status 0
// if it drained cleanly. SIGKILL is the other way it ends.
func childMain() int {
	level := slog.LevelWarn
	if os.Getenv("WEIR_CRASHTEST_DEBUG") != "" {
		level = slog.LevelDebug // every child's debug log, in its stderr file
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if err := runChild(logger); err != nil {
		logger.Error("crashtest child failed", "err", err)
		return 1
	}
	return 0
}

// journalPath is the checkpoint journal's path beside the output at out.
func journalPath(out string) string { return out + ".ckpt" }

func runChild(logger *slog.Logger) error {
	// SIGTERM or Ctrl-C (SIGINT) cancels runCtx, and Run drains: the
	// program shape of every weir application (README, "API tour").
	runCtx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx := context.Background()

	env, err := localaws.Start(ctx, localaws.Options{Kinesis: true, DynamoDB: true})
	if err != nil {
		return err
	}
	defer env.Close()
	slow, err := time.ParseDuration(os.Getenv(envSlow))
	if err != nil {
		return fmt.Errorf("%s: %w", envSlow, err)
	}
	tuning, err := tuningFromEnv()
	if err != nil {
		return err
	}
	out, err := openBatchFile(os.Getenv(envOut), "pid-"+strconv.Itoa(os.Getpid()), slow, nil)
	if err != nil {
		return err
	}
	defer out.Close()
	jr, err := openJournal(journalPath(os.Getenv(envOut)))
	if err != nil {
		return err
	}
	defer jr.Close()
	// The lease table's client inspects every checkpoint write against
	// the completions the recovery log holds (G4).
	model := newLogModel()
	shared := os.Getenv(envShared) == "1"
	spy := &ddbSpy{next: env.DynamoDB(), model: model, crash: newCrash(), journal: jr, worker: tuning.withDefaults().worker}
	var opener recovery.Opener = modelOpener{inner: logOpener(env, shared, os.Getenv(envLog), os.Getenv(envTable), tuning.worker, tuning.attempt, logger),
		model: model}
	state := os.Getenv(envState)
	if state != "" {
		opener = stateOpener{inner: opener.(modelOpener), prefix: state}
	}
	dedupe := os.Getenv(envDedupe)
	if dedupe != "" {
		// State per shard replaces the recovery log: no log, so no model
		// of its completions for the spy to check checkpoints against.
		opener, spy.model = nil, nil
	}
	p, _, err := newPipeline(pipelineConfig{
		aws:                env.AWSConfig(),
		kinesisEndpoint:    env.KinesisEndpoint,
		dynamoEndpoint:     env.DynamoDBEndpoint,
		stream:             os.Getenv(envStream),
		table:              os.Getenv(envTable),
		tuning:             tuning,
		recovery:           opener,
		state:              state,
		sink:               os.Getenv(envSink),
		sinkMarks:          sinkMarks(os.Getenv(envOut)),
		sinkOrigins:        os.Getenv(envSinkOrigins) == "1",
		kinesisSink:        os.Getenv(envKinesisSink),
		kinesisSinkOrigins: os.Getenv(envKinesisSinkOrigins) == "1",
		kinesisSinkCopies:  os.Getenv(envKinesisSinkCopies) == "1",
		dedupe:             dedupe,
		out:                out,
		logger:             logger,
		dynamo:             spy,
	})
	if err != nil {
		return err
	}
	return p.Run(runCtx)
}
