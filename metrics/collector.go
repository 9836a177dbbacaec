package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/stream"
)

// ErrInvalidConfig is wrapped by the error New returns for a bad Config.
var ErrInvalidConfig = errors.New("metrics: invalid config")

// DefaultHistory is the default of Config.History.
const DefaultHistory = 300

// listFailWarning is the number of consecutive failed listings of the lease
// table that is first logged at WARN (then again as the number doubles).
const listFailWarning = 5

// maxErrLen is the longest error text a Snapshot keeps (BatchSample.Err,
// Fleet.Err), in bytes: a longer one is cut and ends with a note of how much
// was cut. With History, it bounds the memory, the JSON snapshot and the
// status page that errors of any size can take.
const maxErrLen = 4 << 10

// defaultLeaseDuration is the default of Config.LeaseDuration: the lease
// table's default (leasetable.Config.LeaseDuration's, 10s), which this
// package cannot import without linking the AWS SDK.
const defaultLeaseDuration = 10 * time.Second

// Config configures a Collector.
type Config struct {
	// BatchInterval is the pipeline's batch interval
	// (stream.Pipeline.BatchInterval). Required.
	BatchInterval time.Duration
	// Receivers are the receivers to sample, each with its own Name (for a
	// Kinesis receiver, kinesismetrics.Receiver). Default: none.
	Receivers []Receiver
	// Leases, when set, is listed at every sample to show the whole fleet
	// and to tell stolen leases from expired ones: for Kinesis,
	// kinesismetrics.Leases of the application's leasetable.Config.
	// Default: nil.
	Leases LeaseLister
	// SampleInterval is how often Run samples the Receivers and Leases.
	// Default: BatchInterval, and at least 1s.
	SampleInterval time.Duration
	// History is how many recent batches, and recent failed batches, are
	// kept. Default: DefaultHistory (300).
	History int
	// DelayWarning is the scheduling delay above which, if it grows, the
	// Collector warns that batches fall behind; the warning ends once the
	// delay is under half of it. Default: 3 batch intervals.
	DelayWarning time.Duration
	// LagWarning is the MillisBehindLatest of a shard above which, if it
	// grows, the Collector warns that its reader falls behind. Default: 1m.
	LagWarning time.Duration
	// LeaseDuration is the lease table's lease duration: a lease acquired
	// from a worker that had not renewed it for that long counts as
	// expired, otherwise as stolen. Default: 10s, the lease table's
	// default (leasetable.Config.LeaseDuration).
	LeaseDuration time.Duration
	// Clock times samples and warnings. Default: clock.Real{}.
	Clock clock.Clock
	// Logger receives the warnings, at WARN, and the end of a warned
	// condition, at INFO. Default: slog.Default(), so warnings are seen.
	Logger *slog.Logger
}

func (cfg Config) validate() error {
	var problems []error
	add := func(format string, args ...any) { problems = append(problems, fmt.Errorf(format, args...)) }
	if cfg.BatchInterval <= 0 {
		add("BatchInterval %v: must be > 0: pass the pipeline's, stream.Pipeline.BatchInterval()", cfg.BatchInterval)
	}
	if cfg.SampleInterval < 0 {
		add("SampleInterval %v: must be > 0 (or 0 for the default)", cfg.SampleInterval)
	}
	if cfg.SampleInterval > 0 && cfg.SampleInterval < time.Millisecond {
		// Seconds meant, nanoseconds written: with Leases, lease table
		// scans back to back.
		add("SampleInterval %v: must be at least 1ms (or 0 for the default); write a duration in seconds as n * time.Second", cfg.SampleInterval)
	}
	if cfg.History < 0 {
		add("History %d: must be > 0 (or 0 for the default, %d)", cfg.History, DefaultHistory)
	}
	if cfg.DelayWarning < 0 {
		add("DelayWarning %v: must be > 0 (or 0 for the default, 3 batch intervals)", cfg.DelayWarning)
	}
	if cfg.LagWarning < 0 {
		add("LagWarning %v: must be > 0 (or 0 for the default, 1m)", cfg.LagWarning)
	}
	if cfg.LeaseDuration < 0 {
		add("LeaseDuration %v: must be > 0 (or 0 for the default, %v)", cfg.LeaseDuration, defaultLeaseDuration)
	}
	names := make(map[string]int, len(cfg.Receivers))
	for i, r := range cfg.Receivers {
		if r == nil {
			add("Receivers[%d] nil: remove it or pass a receiver (kinesismetrics.Receiver(r) for Kinesis)", i)
			continue
		}
		name := r.Name()
		if name == "" {
			add("Receivers[%d] has an empty Name: it must name the receiver in metric labels", i)
		} else if j, dup := names[name]; dup {
			add("Receivers[%d] and [%d] are both named %q: each receiver needs its own name (one receiver per stream)", j, i, name)
		}
		names[name] = i
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(problems...))
	}
	return nil
}

func (cfg Config) withDefaults() Config {
	if cfg.SampleInterval == 0 {
		cfg.SampleInterval = max(cfg.BatchInterval, time.Second)
	}
	if cfg.History == 0 {
		cfg.History = DefaultHistory
	}
	if cfg.DelayWarning == 0 {
		cfg.DelayWarning = 3 * cfg.BatchInterval
	}
	if cfg.LagWarning == 0 {
		cfg.LagWarning = time.Minute
	}
	if cfg.LeaseDuration == 0 {
		cfg.LeaseDuration = defaultLeaseDuration
	}
	cfg.Clock = clock.Or(cfg.Clock)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Receivers = slices.Clone(cfg.Receivers)
	return cfg
}

// Collector gathers a pipeline's metrics: it is a stream.Listener for the
// batches, and Run samples the Receivers and the lease table. It is safe for
// concurrent use; its Listener methods only update counters and log.
type Collector struct {
	stream.NopListener
	cfg Config

	mu        sync.Mutex
	counts    BatchCounts
	outputs   []OutputCounts
	scheduled int64 // input records of scheduled batches that this Run's receivers read
	recent    []BatchSample
	failed    []BatchSample
	receivers []ReceiverSample
	names     []string // of the receivers, in order
	fleet     *Fleet
	lastTable map[string]Lease     // as of the latest listing
	prevTable map[string]Lease     // as of the one before
	changed   map[string]time.Time // per shard: listing that saw its owner or counter change
	prevSeen  map[string]time.Time // changed, as of the listing before the latest
	held      []map[string]bool    // per receiver, as of the latest sample
	completed []map[string][]seen  // per receiver and shard: completed positions not yet checkpointed
	listFails int                  // consecutive failed listings of the lease table
	warn      warnings
}

// New validates cfg and returns a Collector.
func New(cfg Config) (*Collector, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	c := &Collector{
		cfg:       cfg,
		held:      make([]map[string]bool, len(cfg.Receivers)),
		completed: make([]map[string][]seen, len(cfg.Receivers)),
		names:     make([]string, len(cfg.Receivers)),
	}
	for i, r := range cfg.Receivers {
		c.names[i] = r.Name()
	}
	c.counts.SchedulingDelay = newHistogram(batchBounds)
	c.counts.ProcessingTime = newHistogram(batchBounds)
	c.counts.TotalDelay = newHistogram(batchBounds)
	c.warn.init(cfg)
	// A first sample of the receivers, which does no I/O (the lease table
	// waits for Run), so that their counters are there from the first
	// scrape, at 0.
	c.sample(false, nil, nil)
	return c, nil
}

// BatchScheduled counts a scheduled batch.
func (c *Collector) BatchScheduled(b stream.BatchInfo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts.Scheduled++
	c.counts.Pending++
	c.counts.UnbatchedBlocks = b.Unbatched
	if !b.Recovered {
		// Records an earlier Run read are not in this one's reads.
		c.scheduled += int64(b.Records - b.RecoveredRecords)
	}
}

// BatchStarted counts a batch out of the pending ones.
func (c *Collector) BatchStarted(b stream.BatchInfo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts.Pending = max(c.counts.Pending-1, 0)
	c.counts.UnbatchedBlocks = b.Unbatched
}

// BatchCompleted records a completed batch and checks its delay.
func (c *Collector) BatchCompleted(b stream.BatchInfo) {
	s := BatchSample{
		Time: b.Time, Records: b.Records, Blocks: b.Blocks,
		SchedulingDelay: b.SchedulingDelay, ProcessingTime: b.ProcessingTime,
		TotalDelay: b.SchedulingDelay + b.ProcessingTime,
		Recovered:  b.Recovered, Ranges: slices.Clone(b.Ranges),
	}
	if b.Err != nil {
		s.Err = clipErr(b.Err.Error())
	}
	c.mu.Lock()
	c.counts.Completed++
	c.counts.UnbatchedBlocks = b.Unbatched
	c.counts.Records += int64(b.Records)
	c.counts.SchedulingDelay.observe(s.SchedulingDelay)
	c.counts.ProcessingTime.observe(s.ProcessingTime)
	c.counts.TotalDelay.observe(s.TotalDelay)
	if s.Recovered {
		c.counts.Recovered++
	}
	c.countOutputsLocked(b.Outputs)
	c.recent = appendCapped(c.recent, s, c.cfg.History)
	if s.Err != "" {
		c.counts.Failed++
		c.failed = appendCapped(c.failed, s, c.cfg.History)
	}
	logs := c.warn.batch(c.cfg.Clock.Now(), c.recent)
	c.mu.Unlock()
	c.log(logs)
}

// countOutputsLocked adds what the outputs' failure policies did in a
// batch. An output is known by its position: a pipeline's outputs do not
// change while it runs.
func (c *Collector) countOutputsLocked(outs []stream.OutputInfo) {
	for i, o := range outs {
		if i == len(c.outputs) {
			c.outputs = append(c.outputs, OutputCounts{Output: o.Output})
		}
		c.outputs[i].Output = o.Output
		c.outputs[i].Retries += int64(o.Retries)
		c.outputs[i].Quarantined += int64(o.Quarantined)
	}
}

// clipErr returns msg cut to at most maxErrLen bytes, at a character
// boundary, with a note of the bytes cut.
func clipErr(msg string) string {
	if len(msg) <= maxErrLen {
		return msg
	}
	const noteRoom = 40 // " … [N bytes cut]" with N of up to 20 digits
	end := maxErrLen - noteRoom
	for end > 0 && !utf8.RuneStart(msg[end]) {
		end--
	}
	return msg[:end] + fmt.Sprintf(" … [%d bytes cut]", len(msg)-end)
}

// appendCapped appends s to list, which keeps between limit and 2*limit
// of the latest items: the oldest are dropped limit at a time, so that an
// append costs O(1) amortized, not a move of the whole history. Read it
// through latest.
func appendCapped(list []BatchSample, s BatchSample, limit int) []BatchSample {
	if len(list) >= 2*limit {
		n := copy(list, list[len(list)-limit+1:])
		clear(list[n:])
		list = list[:n]
	}
	return append(list, s)
}

// latest returns a copy of the last limit items of list.
func latest(list []BatchSample, limit int) []BatchSample {
	return slices.Clone(list[max(len(list)-limit, 0):])
}

// Run samples the Receivers and the lease table every SampleInterval, and
// checks the shards' lag, until ctx is done; it returns nil then. A failed
// listing of the lease table is never fatal: it is shown in
// Snapshot.Fleet.Err, and logged at WARN once 5 listings in a row failed
// (then at 10, 20...), when it becomes a "lease_listing" warning of
// Snapshot.Warnings until a listing succeeds, which is logged at INFO. A
// listing that read some items but not others (see LeaseLister) is not a
// failed one: its leases are shown, with its error in
// Snapshot.Fleet.Unreadable.
func (c *Collector) Run(ctx context.Context) error {
	t := c.cfg.Clock.NewTicker(c.cfg.SampleInterval)
	defer t.Stop()
	for {
		c.Sample(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
	}
}

// Sample samples the Receivers and the lease table now. Run calls it on
// its interval; call it yourself to sample without Run.
func (c *Collector) Sample(ctx context.Context) {
	var table []Lease
	var listErr error
	if c.cfg.Leases != nil {
		table, listErr = c.cfg.Leases.List(ctx)
	}
	c.sample(c.cfg.Leases != nil, table, listErr)
}

// sample samples the Receivers and records a listing of the lease table,
// if listed.
func (c *Collector) sample(listed bool, table []Lease, listErr error) {
	now := c.cfg.Clock.Now()
	samples := make([]ReceiverSample, len(c.cfg.Receivers))
	for i, r := range c.cfg.Receivers {
		samples[i] = ReceiverSample{Index: i, Name: c.names[i], Stats: r.Stats()}
	}

	c.mu.Lock()
	var logs []logLine
	if listed {
		logs = append(logs, c.listedLocked(now, table, listErr)...)
	}
	var read int64
	for i := range samples {
		s := &samples[i]
		if len(c.receivers) > i {
			s.Leases = c.receivers[i].Leases
		}
		c.leaseChangesLocked(now, i, s)
		s.CheckpointLag = c.checkpointLagLocked(now, i, s)
		read += s.Stats.RecordsRead
	}
	c.receivers = samples
	if len(samples) > 0 {
		c.counts.UnbatchedRecords = max(read-c.scheduled, 0)
	}
	logs = append(logs, c.warn.shards(now, samples)...)
	c.mu.Unlock()
	c.log(logs)
}

// listedLocked records a listing of the lease table; c.mu is held.
func (c *Collector) listedLocked(now time.Time, table []Lease, err error) []logLine {
	if err != nil && table == nil {
		if c.fleet == nil {
			c.fleet = &Fleet{}
		}
		c.fleet.Err = clipErr(err.Error())
		// A table that a starting receiver has not created yet fails a
		// listing or two: warn only about a failure that lasts.
		c.listFails++
		if c.listFails < listFailWarning {
			return nil
		}
		return c.warn.raise(now, "lease_listing", Warning{Kind: "lease_listing"}, int64(c.listFails),
			"metrics: cannot list the lease table; the status page shows the last listing",
			"failed_listings", c.listFails, "err", err,
			"fix", "check Config.Leases: the table name, its DynamoDB endpoint and the credentials' dynamodb:Scan permission")
	}
	var logs []logLine
	if c.listFails > 0 {
		logs = c.warn.clear("lease_listing", "metrics: the lease table is listed again", "failed_listings", c.listFails)
	}
	c.listFails = 0
	slices.SortFunc(table, func(a, b Lease) int { return strings.Compare(a.Shard, b.Shard) })
	f := &Fleet{Listed: now, Leases: table}
	if err != nil {
		// Some items could not be read as leases: the others are shown
		// with the error naming them; the table itself was listed.
		f.Unreadable = clipErr(err.Error())
	}
	byShard := make(map[string]Lease, len(table))
	for _, l := range table {
		byShard[l.Shard] = l
		if l.Owner != "" && !slices.Contains(f.Workers, l.Owner) {
			f.Workers = append(f.Workers, l.Owner)
		}
	}
	slices.Sort(f.Workers)
	c.fleet = f
	if c.changed == nil {
		c.changed, c.prevSeen = make(map[string]time.Time), make(map[string]time.Time)
	}
	for shard, l := range byShard {
		old, ok := c.lastTable[shard]
		c.prevSeen[shard] = c.changed[shard]
		if !ok || old.Owner != l.Owner || old.Counter != l.Counter {
			c.changed[shard] = now
		}
	}
	c.prevTable, c.lastTable = c.lastTable, byShard
	return logs
}

// leaseChangesLocked counts the leases receiver i acquired and lost since
// its previous sample; c.mu is held.
func (c *Collector) leaseChangesLocked(now time.Time, i int, s *ReceiverSample) {
	held := make(map[string]bool, len(s.Stats.Held))
	for _, shard := range s.Stats.Held {
		held[shard] = true
	}
	before := c.held[i]
	c.held[i] = held
	for shard := range held {
		if before[shard] {
			continue
		}
		prev, known := c.prevTable[shard]
		switch {
		case !known || prev.Owner == "" || prev.Owner == s.Stats.WorkerID:
			s.Leases.Taken++
		case now.Sub(c.prevSeen[shard]) >= c.cfg.LeaseDuration:
			s.Leases.Expired++
		default:
			s.Leases.Stolen++
		}
	}
	var prev map[string]ShardStats // as of the previous sample
	if i < len(c.receivers) {
		prev = c.receivers[i].Stats.Shards
	}
	for shard := range before {
		now := s.Stats.Shards[shard]
		switch {
		case held[shard] || now.Ended:
		case now.HandedBack > prev[shard].HandedBack:
			s.Leases.HandedBack++
		default:
			s.Leases.Lost++
		}
	}
}

// seen is a shard's latest completed sequence number and when a sample
// first saw it.
type seen struct {
	seq string
	at  time.Time
}

// maxSeen bounds the completed positions kept per shard while its
// checkpoint does not move; the oldest are dropped (the lag stays right).
const maxSeen = 1024

// checkpointLagLocked returns, per shard of s, how long its oldest
// completed record not covered by its checkpoint has waited: the time since
// a sample first saw the completed position just past the checkpoint. It is
// 0 for a shard whose checkpoint covers every completed record, and absent
// for a shard that is not checkpointed or that this receiver has not yet
// tried to checkpoint (no commit, no failure): before its first checkpoint
// interval the lag would only show how long the interval is. c.mu is held.
func (c *Collector) checkpointLagLocked(now time.Time, i int, s *ReceiverSample) map[string]time.Duration {
	if c.completed[i] == nil {
		c.completed[i] = make(map[string][]seen)
	}
	lag := make(map[string]time.Duration)
	for shard, st := range s.Stats.Shards {
		q := c.completed[i][shard]
		if !st.Checkpointed || st.LatestCompleted == "" {
			delete(c.completed[i], shard)
			continue
		}
		if len(q) == 0 || q[len(q)-1].seq != st.LatestCompleted {
			q = append(q, seen{seq: st.LatestCompleted, at: now})
		}
		if batch.ValidateSeq(st.Checkpoint) == nil {
			for len(q) > 0 && batch.CompareSeq(q[0].seq, st.Checkpoint) <= 0 {
				q = q[1:]
			}
		}
		if len(q) > maxSeen {
			q = q[len(q)-maxSeen:]
		}
		c.completed[i][shard] = q
		if st.CheckpointCommits == 0 && st.CheckpointFailures == 0 {
			continue
		}
		lag[shard] = 0
		if len(q) > 0 {
			lag[shard] = now.Sub(q[0].at)
		}
	}
	// A shard the receiver no longer reports (it forgets the shards it
	// stopped reading) is forgotten here too: its positions would make the
	// lag of a later read of it start at their time.
	for shard := range c.completed[i] {
		if _, ok := s.Stats.Shards[shard]; !ok {
			delete(c.completed[i], shard)
		}
	}
	return lag
}

// Snapshot returns what the Collector knows now.
func (c *Collector) Snapshot() Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := Snapshot{
		Time:          c.cfg.Clock.Now(),
		BatchInterval: c.cfg.BatchInterval,
		Batches:       c.counts.clone(),
		Recent:        latest(c.recent, c.cfg.History),
		Failed:        latest(c.failed, c.cfg.History),
		Receivers:     slices.Clone(c.receivers),
		Warnings:      c.warn.active(),
		Outputs:       slices.Clone(c.outputs),
	}
	if c.fleet != nil {
		f := *c.fleet
		f.Leases, f.Workers = slices.Clone(f.Leases), slices.Clone(f.Workers)
		s.Fleet = &f
	}
	return s
}

// clone returns a copy of b that shares no memory with it.
func (b BatchCounts) clone() BatchCounts {
	b.SchedulingDelay = b.SchedulingDelay.clone()
	b.ProcessingTime = b.ProcessingTime.clone()
	b.TotalDelay = b.TotalDelay.clone()
	return b
}

// logLine is a log record decided under c.mu and written after it.
type logLine struct {
	level slog.Level
	msg   string
	args  []any
}

func (c *Collector) log(lines []logLine) {
	for _, l := range lines {
		c.cfg.Logger.Log(context.Background(), l.level, l.msg, l.args...)
	}
}
