//go:build unix

package crashtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/localaws"
)

// waitLimit bounds every wait for a condition: a failure guard, never an
// assertion about time.
const waitLimit = 30 * time.Second

// producer puts records with unique increasing IDs (the record's data is
// its ID, its partition key too, so they spread over the shards) and knows
// which puts succeeded: an entry the call reports as put is put; the
// entries of a call that failed as a whole may or may not be.
type producer struct {
	client *awskinesis.Client
	stream string

	mu     sync.Mutex
	next   int64
	put    map[int64]bool
	maybe  map[int64]bool
	maxSeq map[string]string // shard -> greatest sequence number put
	last   map[string]int64  // shard -> ID of the record at maxSeq
}

func newProducer(client *awskinesis.Client, stream string) *producer {
	return &producer{client: client, stream: stream, next: 1,
		put: map[int64]bool{}, maybe: map[int64]bool{}, maxSeq: map[string]string{}, last: map[string]int64{}}
}

// putOnce puts n new records in one PutRecords call.
func (p *producer) putOnce(ctx context.Context, n int) error {
	p.mu.Lock()
	first := p.next
	p.next += int64(n)
	p.mu.Unlock()
	entries := make([]types.PutRecordsRequestEntry, n)
	for i := range entries {
		id := strconv.FormatInt(first+int64(i), 10)
		entries[i] = types.PutRecordsRequestEntry{Data: []byte(id), PartitionKey: aws.String(id)}
	}
	out, err := p.client.PutRecords(ctx, &awskinesis.PutRecordsInput{StreamName: &p.stream, Records: entries})
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range entries {
		id := first + int64(i)
		switch {
		case err != nil:
			p.maybe[id] = true
		case out.Records[i].ErrorCode == nil:
			p.put[id] = true
			shard, seq := aws.ToString(out.Records[i].ShardId), aws.ToString(out.Records[i].SequenceNumber)
			if batch.MaxSeq(p.maxSeq[shard], seq) == seq {
				p.maxSeq[shard], p.last[shard] = seq, id
			}
		}
	}
	if err != nil {
		return fmt.Errorf("put records %d to %d: %w", first, first+int64(n)-1, err)
	}
	return nil
}

// run puts each records every 20ms until stop is closed (it finishes the
// put in flight) or ctx is done.
func (p *producer) run(ctx context.Context, each int, stop <-chan struct{}) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if err := p.putOnce(ctx, each); err != nil {
			return err
		}
		select {
		case <-stop:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// snapshot returns copies of the records put and maybe put.
func (p *producer) snapshot() (put, maybe map[int64]bool, maxSeq map[string]string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.put), maps.Clone(p.maybe), maps.Clone(p.maxSeq)
}

// lastIDs returns, per shard, the ID of the last record put to it.
func (p *producer) lastIDs() map[string]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.last)
}

// defaultPuts is the number of records a test's producer puts every 20ms
// by default (see harness.puts): 500 a second.
const defaultPuts = 10

// harness runs the pipeline in child processes on one stream, lease table,
// recovery log and output file.
type harness struct {
	t      *testing.T
	env    *localaws.Env
	stream string
	table  string
	logDir string
	out    string
	dir    string // children's stderr files
	slow   time.Duration
	shared bool   // a DynamoDB recovery log instead of a directory
	state  string // the state files' prefix: a pipeline with state (see envState)
	sink   string // the DynamoDB sink's table: a pipeline with the sink (see envSink)
	// sinkOrigins makes that sink's output the fleet's, with origins (see
	// envSinkOrigins).
	sinkOrigins bool
	// slowLast, with sink, makes the last child's counting sink slow on
	// the batch holding the shards' last records (see slowSinkIDs).
	slowLast bool
	// kinesisSink is the Kinesis sink's stream: a pipeline with that sink
	// (see envKinesisSink).
	kinesisSink string
	// kinesisSinkOrigins gives that sink's output stream.Origins() (see
	// envKinesisSinkOrigins).
	kinesisSinkOrigins bool
	// kinesisSinkCopies makes that sink's client put some of its calls'
	// records again later (see envKinesisSinkCopies).
	kinesisSinkCopies bool
	// dedupe is the count table of a reader of h.stream through
	// kinesissink.Deduplicate instead of the test pipeline (see
	// envDedupe).
	dedupe string
	// kinesisEndpoint and dynamoEndpoint are the children's endpoints: the
	// servers' by default, a faults.Proxy's in the outage tests.
	kinesisEndpoint, dynamoEndpoint string
	// tuning is the children's worker ID and timing (see childTuning).
	tuning childTuning
	// puts is the number of records the producer of startProducer puts
	// every 20ms: defaultPuts if 0.
	puts int
	runs int
	// checkpoints is the number of checkpoint writes the children made,
	// once checkJournal ran.
	checkpoints int
}

func newHarness(t *testing.T, env *localaws.Env, shards int) *harness {
	t.Helper()
	dir := t.TempDir()
	name := localaws.UniqueName(t)
	h := &harness{t: t, env: env, stream: name, table: name, logDir: filepath.Join(dir, "log"),
		out: filepath.Join(dir, "out.txt"), dir: dir, slow: 20 * time.Millisecond,
		kinesisEndpoint: env.KinesisEndpoint, dynamoEndpoint: env.DynamoDBEndpoint}
	ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
	defer cancel()
	if err := env.CreateStream(ctx, h.stream, shards); err != nil {
		t.Fatal(err)
	}
	return h
}

// child is one running child process.
type child struct {
	h      *harness
	n      int
	cmd    *exec.Cmd
	stderr string
	exited chan struct{} // closed once Wait returned
	err    error         // Wait's, set before exited is closed
}

// start starts a child process running the pipeline.
func (h *harness) start() *child {
	h.t.Helper()
	h.runs++
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(),
		envChild+"=1",
		localaws.EnvKinesisEndpoint+"="+h.kinesisEndpoint,
		localaws.EnvDynamoDBEndpoint+"="+h.dynamoEndpoint,
		envStream+"="+h.stream, envTable+"="+h.table, envLog+"="+h.logDir, envOut+"="+h.out,
		envSlow+"="+h.slow.String(), envShared+"="+map[bool]string{true: "1"}[h.shared],
		envState+"="+h.state, envSink+"="+h.sink, envSinkOrigins+"="+map[bool]string{true: "1"}[h.sinkOrigins],
		envKinesisSink+"="+h.kinesisSink,
		envKinesisSinkOrigins+"="+map[bool]string{true: "1"}[h.kinesisSinkOrigins],
		envKinesisSinkCopies+"="+map[bool]string{true: "1"}[h.kinesisSinkCopies], envDedupe+"="+h.dedupe)
	cmd.Env = append(cmd.Env, h.tuning.env()...)
	return launch(h, h.runs, filepath.Join(h.dir, fmt.Sprintf("child-%d.stderr", h.runs)), cmd)
}

// launch starts cmd as h's child number n, its stdout and stderr going to
// the file stderr; the test's cleanup kills it if it still runs.
func launch(h *harness, n int, stderr string, cmd *exec.Cmd) *child {
	h.t.Helper()
	c := &child{h: h, n: n, cmd: cmd, stderr: stderr, exited: make(chan struct{})}
	errf, err := os.Create(c.stderr)
	if err != nil {
		h.t.Fatal(err)
	}
	defer errf.Close()
	c.cmd.Stdout, c.cmd.Stderr = errf, errf
	if err := c.cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	go func() { // owned by c: every path below waits for exited
		c.err = c.cmd.Wait()
		close(c.exited)
	}()
	h.t.Cleanup(func() {
		_ = c.cmd.Process.Signal(syscall.SIGKILL)
		<-c.exited
	})
	return c
}

// alive fails the test if the child has exited.
func (c *child) alive() {
	c.h.t.Helper()
	select {
	case <-c.exited:
		c.h.t.Fatalf("child %d exited on its own: %v\n%s", c.n, c.err, c.tail())
	default:
	}
}

// kill kills the child with SIGKILL after delay, and waits for it to die.
// The delay is the test's input (when the crash happens), not a wait for a
// condition.
func (c *child) kill(delay time.Duration) {
	c.h.t.Helper()
	c.after(delay)
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		c.h.t.Fatal(err)
	}
	<-c.exited
}

// after waits delay, the test's input (a crash or pause moment), and
// fails the test if the child exited meanwhile.
func (c *child) after(delay time.Duration) {
	c.h.t.Helper()
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-c.exited:
	}
	c.alive()
}

// term sends SIGTERM and waits for the child to drain and exit 0.
func (c *child) term() {
	c.h.t.Helper()
	c.stop(syscall.SIGTERM)
}

// stop sends sig and waits for the child to drain and exit 0.
func (c *child) stop(sig os.Signal) {
	c.h.t.Helper()
	c.alive()
	if err := c.cmd.Process.Signal(sig); err != nil {
		c.h.t.Fatal(err)
	}
	t := time.NewTimer(waitLimit)
	defer t.Stop()
	select {
	case <-c.exited:
	case <-t.C:
		c.h.t.Fatalf("child %d did not drain within %v after %v\n%s", c.n, waitLimit, sig, c.tail())
	}
	if c.err != nil {
		c.h.t.Fatalf("child %d exited after %v with %v, want exit status 0\n%s", c.n, sig, c.err, c.tail())
	}
}

// tailBytes is how much of a child's stderr a failure shows: 4000 bytes,
// or 40000 with WEIR_CRASHTEST_DEBUG set (debug logs).
func tailBytes() int {
	if os.Getenv("WEIR_CRASHTEST_DEBUG") != "" {
		return 40000
	}
	return 4000
}

// tail returns the end of the child's stderr.
func (c *child) tail() string {
	b, _ := os.ReadFile(c.stderr)
	if n := tailBytes(); len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// awaitOutput polls the output file until every record in want has a
// record line, failing the test after waitLimit or if c exits.
func (h *harness) awaitOutput(c *child, want map[int64]bool) {
	h.t.Helper()
	awaitRecords(h.t, h.out, want, c.exited, func() string { return fmt.Sprintf("child %d: %v\n%s", c.n, c.err, c.tail()) })
}

// awaitRecords polls the output file at path until every record in want
// has a record line, failing t after waitLimit or once exited is closed;
// why describes the writer for the failure.
func awaitRecords(t *testing.T, path string, want map[int64]bool, exited <-chan struct{}, why func() string) {
	t.Helper()
	awaitRecordsIn(t, []string{path}, want, exited, why)
}

// awaitRecordsIn is awaitRecords over several output files (a fleet's):
// every record in want must have a record line in one of them.
func awaitRecordsIn(t *testing.T, paths []string, want map[int64]bool, exited <-chan struct{}, why func() string) {
	t.Helper()
	seen := map[int64]bool{}
	offs := make([]int64, len(paths))
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		for i, path := range paths {
			var err error
			if offs[i], err = scanRecords(path, offs[i], seen); err != nil {
				t.Fatal(err)
			}
		}
		missing := 0
		for id := range want {
			if !seen[id] {
				missing++
			}
		}
		if missing == 0 {
			return
		}
		select {
		case <-tick.C:
		case <-exited:
			t.Fatalf("the pipeline stopped with %d records not output: %s", missing, why())
		case <-deadline.C:
			t.Fatalf("%d of %d records not output after %v: %s", missing, len(want), waitLimit, why())
		}
	}
}

// awaitBatches polls the output file until c has written n end lines,
// failing the test after waitLimit or if c exits.
func (h *harness) awaitBatches(c *child, n int) {
	h.t.Helper()
	h.awaitOwn(c, fmt.Sprintf("%d batches", n), 20*time.Millisecond, func(mine string) bool {
		return strings.Count(mine, "\n"+lineEnd+" ") >= n
	})
}

// awaitPastRecovery polls the output file until c has completed (written
// the done line of) a batch later than every batch begun before it
// started: batches run in time order, so every batch a killed child began
// and c ran again is complete. Record lines a killed child wrote satisfy
// awaitOutput before that.
func (h *harness) awaitPastRecovery(c *child) {
	h.t.Helper()
	label := "\n" + lineStart + " pid-" + strconv.Itoa(c.cmd.Process.Pid) + "\n"
	var last int64 // the latest batch time begun before c started
	h.awaitOwn(c, "a done line past the batches begun before it", 20*time.Millisecond, func(mine string) bool {
		if last == 0 {
			data, err := os.ReadFile(h.out)
			if err != nil {
				h.t.Fatal(err)
			}
			all := "\n" + string(data)
			for l := range strings.Lines(all[:strings.LastIndex(all, label)+1]) {
				if tm, ok := strings.CutPrefix(strings.TrimSuffix(l, "\n"), lineBegin+" "); ok {
					n, _ := strconv.ParseInt(tm, 10, 64)
					last = max(last, n)
				}
			}
		}
		for l := range strings.Lines(mine) {
			if tm, ok := strings.CutPrefix(strings.TrimSuffix(l, "\n"), lineDone+" "); ok {
				if n, _ := strconv.ParseInt(tm, 10, 64); n > last {
					return true
				}
			}
		}
		return false
	})
}

// awaitLastRecords polls the output file and the lease table until, for
// every shard, c has completed a batch holding the last record put to it
// (last, at maxSeq: its record line, then the done line of its batch) or
// the shard's lease is checkpointed at that record: c has then read and
// completed every record, and its drain checkpoints the last. Record lines
// a killed child wrote satisfy awaitOutput, and a batch c began after its
// recovery awaitPastRecovery, while c may still be reading again what
// that child completed but did not checkpoint: a SIGTERM then leaves the
// checkpoints short of the shards' last records. Nor is c's own record
// line enough: the batch's other outputs (a sink's writes) still run after
// it, and a receiver's graceful stop waits for their completion at most
// the lease duration before its final checkpoints, which a slow sink
// outlasts (TestCrashDrainSlowLastBatch).
func (h *harness) awaitLastRecords(c *child, last map[string]int64, maxSeq map[string]string) {
	h.t.Helper()
	h.awaitOwn(c, "the completion of the last record of every shard", 20*time.Millisecond, func(mine string) bool {
		if completedLast(mine, last, nil) {
			return true
		}
		leases, err := h.leases()
		if err != nil {
			h.t.Fatal(err)
		}
		checkpointed := map[string]bool{}
		for _, l := range leases {
			checkpointed[l.Shard] = l.Checkpoint == maxSeq[l.Shard]
		}
		return completedLast(mine, last, checkpointed)
	})
}

// completedLast reports whether mine, a child's own lines from the newline
// ending its start line on, holds a record line of each shard's last
// record (last), but for the shards checkpointed at it, in a batch whose
// done line follows.
func completedLast(mine string, last map[string]int64, checkpointed map[string]bool) bool {
	for shard, id := range last {
		if checkpointed[shard] {
			continue
		}
		rec := strings.LastIndex(mine, "\n"+lineRec+" "+strconv.FormatInt(id, 10)+" "+shard+"\n")
		if rec < 0 {
			return false
		}
		begin := strings.LastIndex(mine[:rec], "\n"+lineBegin+" ")
		if begin < 0 {
			return false
		}
		tm, _, _ := strings.Cut(mine[begin+len("\n"+lineBegin+" "):], "\n")
		if !strings.Contains(mine[rec:], "\n"+lineDone+" "+tm+"\n") {
			return false
		}
	}
	return true
}

// awaitInOutput polls the output file, often, until c is inside a batch's
// output (its last begin line has no end line after it), failing the test
// after waitLimit or if c exits. A kill right after it lands, most often,
// between the batch's outputs and its completion.
func (h *harness) awaitInOutput(c *child) {
	h.t.Helper()
	h.awaitOwn(c, "a begin line with no end", 2*time.Millisecond, func(mine string) bool {
		return strings.LastIndex(mine, "\n"+lineBegin+" ") > strings.LastIndex(mine, "\n"+lineEnd+" ")
	})
}

// awaitOwn polls the output file every period until ok accepts what c
// wrote (after its start line, from the newline ending it on: the last
// start line naming c's pid, which an earlier child may have had), failing
// the test, with what in the message, after waitLimit or if c exits.
func (h *harness) awaitOwn(c *child, what string, period time.Duration, ok func(mine string) bool) {
	h.t.Helper()
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	tick := time.NewTicker(period)
	defer tick.Stop()
	label := lineStart + " pid-" + strconv.Itoa(c.cmd.Process.Pid)
	for {
		data, err := os.ReadFile(h.out)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			h.t.Fatal(err)
		}
		all := "\n" + string(data)
		if i := strings.LastIndex(all, "\n"+label+"\n"); i >= 0 && ok(all[i+len(label)+1:]) {
			return
		}
		select {
		case <-tick.C:
		case <-c.exited:
			h.t.Fatalf("child %d exited before writing %s: %v\n%s", c.n, what, c.err, c.tail())
		case <-deadline.C:
			h.t.Fatalf("child %d did not write %s within %v\n%s", c.n, what, waitLimit, c.tail())
		}
	}
}

// scanRecords adds to seen the IDs of the record lines of path's whole
// lines from off on, and returns the offset after the last whole line.
func scanRecords(path string, off int64, seen map[int64]bool) (int64, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return off, nil
	}
	if err != nil {
		return off, err
	}
	defer f.Close()
	if _, err := f.Seek(off, 0); err != nil {
		return off, err
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(f); err != nil {
		return off, err
	}
	data := buf.String()
	end := strings.LastIndexByte(data, '\n')
	if end < 0 {
		return off, nil
	}
	for _, l := range strings.Split(data[:end], "\n") {
		if rest, ok := strings.CutPrefix(l, lineRec+" "); ok {
			if r, err := parseRec(rest); err == nil {
				seen[r.id] = true
			}
		}
	}
	return off + int64(end) + 1, nil
}

// check parses and checks the output file, failing the test on any
// violation, and returns the figures.
func (h *harness) check(put, maybe map[int64]bool) figures {
	h.t.Helper()
	return checkFile(h.t, h.out, put, maybe, h.state != "")
}

// checkFile parses and checks the output file at path, of a pipeline with
// state if stateful, failing t on any violation, and returns the figures.
func checkFile(t *testing.T, path string, put, maybe map[int64]bool, stateful bool) figures {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := parseOutput(string(data))
	if err != nil {
		t.Fatalf("output %s: %v", path, err)
	}
	tr.stateful = stateful
	f, errs := checkOutput(tr, put, maybe)
	reportViolations(t, errs)
	return f
}

// reportViolations fails t with the first 20 of errs, and their number.
func reportViolations(t *testing.T, errs []error) {
	t.Helper()
	for i, err := range errs {
		if i == 20 {
			t.Errorf("... and %d more violations", len(errs)-i)
			break
		}
		t.Error(err)
	}
}
