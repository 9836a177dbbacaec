//go:build unix

package crashtest

import (
	"cmp"
	"fmt"
	"log/slog"
	"time"

	"github.com/weirstream/weir/checkpoint/leasetable"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/weirstream/weir/recovery"
	"github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/stream"
)

// Timing of the test pipeline: short, so that a few seconds hold many
// batches, checkpoints and compactions.
const (
	batchInterval      = 200 * time.Millisecond
	blockInterval      = 50 * time.Millisecond
	pollInterval       = 20 * time.Millisecond
	checkpointInterval = 100 * time.Millisecond
	leaseDuration      = 3 * time.Second
	compactEvery       = 5
	// kinesisAttemptTimeout is kinesis.Config.AttemptTimeout's default.
	kinesisAttemptTimeout = 10 * time.Second
	// workerID is the default worker ID, fixed, so that a restarted worker
	// takes its own leases back at once instead of waiting for them to
	// expire.
	workerID = "crash-worker"
)

// childTuning is what a test may change in the pipeline: the worker ID (a
// fleet's workers each have one) and timings (a many-shard stream wants
// slower polls and checkpoints). Each field's zero means the default.
type childTuning struct {
	worker     string        // lease owner; default workerID
	poll       time.Duration // Kinesis PollInterval; default pollInterval
	attempt    time.Duration // Kinesis AttemptTimeout; default kinesisAttemptTimeout
	checkpoint time.Duration // lease CheckpointInterval; default checkpointInterval
}

// withDefaults returns tn with each zero field set to its default (but
// attempt, which the receiver defaults).
func (tn childTuning) withDefaults() childTuning {
	tn.worker = cmp.Or(tn.worker, workerID)
	tn.poll = cmp.Or(tn.poll, pollInterval)
	tn.checkpoint = cmp.Or(tn.checkpoint, checkpointInterval)
	return tn
}

// pipelineConfig is what the test pipeline is built from.
type pipelineConfig struct {
	aws             aws.Config
	kinesisEndpoint string
	dynamoEndpoint  string
	stream          string
	table           string // lease table
	// tuning is the worker ID and timing, each field's zero a default.
	tuning   childTuning
	recovery recovery.Opener
	out      *batchFile
	// dynamo, if not nil, is the lease table's client (a test's spy).
	dynamo leasetable.DynamoDBAPI
	logger *slog.Logger
	// state, if set, adds the state operators (see envState).
	state string
	// sink, if set, adds the DynamoDB sink's outputs to this table, which
	// mark their first write at sinkMarks (see envSink).
	sink, sinkMarks string
	// sinkOrigins makes that sink's output the fleet's instead, with
	// stream.Origins() (see envSinkOrigins).
	sinkOrigins bool
	// kinesisSink, if set, adds the Kinesis sink's output to this stream,
	// which marks its first call at sinkMarks (see envKinesisSink).
	kinesisSink string
	// kinesisSinkOrigins gives that output stream.Origins() (see
	// envKinesisSinkOrigins).
	kinesisSinkOrigins bool
	// kinesisSinkCopies makes that output's client put some records again
	// later (see envKinesisSinkCopies).
	kinesisSinkCopies bool
	// dedupe, if set, makes the pipeline a reader of the stream through
	// kinesissink.Deduplicate, counting into this table (see envDedupe),
	// instead of the test pipeline; recovery must then be nil.
	dedupe string
}

// newPipeline builds the pipeline: the Kinesis receiver with leases and
// interval checkpoints, every batch's records appended to cfg.out, and
// its done line once its completion is logged (doneListener).
func newPipeline(cfg pipelineConfig) (*stream.Pipeline, *kinesis.Receiver, error) {
	awsCfg := cfg.aws
	tn := cfg.tuning.withDefaults()
	leaseEndpoint := cfg.dynamoEndpoint
	if cfg.dynamo != nil {
		leaseEndpoint = "" // the client has its endpoint (leasetable refuses both)
	}
	recv, err := kinesis.New(kinesis.Config{
		Stream:          cfg.stream,
		App:             "crashtest",
		InitialPosition: kinesis.TrimHorizon,
		AWS:             &awsCfg,
		Endpoint:        cfg.kinesisEndpoint,
		PollInterval:    tn.poll,
		AttemptTimeout:  tn.attempt,
		Logger:          cfg.logger,
		Leases:          &leasetable.Config{TableName: cfg.table, DynamoDB: cfg.dynamo, Endpoint: leaseEndpoint, WorkerID: tn.worker, LeaseDuration: leaseDuration, CheckpointInterval: tn.checkpoint},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("receiver: %w", err)
	}
	p, err := stream.NewPipeline(stream.Config{
		BatchInterval: batchInterval,
		BlockInterval: blockInterval,
		Recovery:      cfg.recovery,
		CompactEvery:  compactEvery,
		// Used only by the state children's pipeline.
		StateSnapshotInterval: stateSnapshotEvery,
		Logger:                cfg.logger,
		Listeners:             []stream.Listener{doneListener{out: cfg.out}},

		// The state children count keys of records of every shard, which
		// is per-worker state on a receiver with leases. They are one
		// worker at a time, restarted with its own log, so the state is
		// exact: what the test checks.
		AllowSplitState: cfg.state != "",
	})
	if err != nil {
		return nil, nil, fmt.Errorf("context: %w", err)
	}
	recs := stream.From(p, recv, stream.Named(cfg.stream))
	if cfg.dedupe != "" {
		if err := addDedupe(recs, cfg); err != nil {
			return nil, nil, err
		}
		if err := p.Validate(); err != nil {
			return nil, nil, err
		}
		return p, recv, nil
	}
	stream.ForEachBatch(recs, cfg.out.Write, stream.Named("crashfile"))
	if cfg.state != "" {
		addState(recs, cfg.state)
	}
	if cfg.sink != "" {
		add := addSink
		if cfg.sinkOrigins {
			add = addFleetSink
		}
		if err := add(recs, cfg); err != nil {
			return nil, nil, err
		}
	}
	if cfg.kinesisSink != "" {
		if err := addKinesisSink(recs, cfg); err != nil {
			return nil, nil, err
		}
	}
	if err := p.Validate(); err != nil {
		return nil, nil, err
	}
	return p, recv, nil
}
