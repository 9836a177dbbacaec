//go:build unix

package crashtest

import (
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/localaws/faults"
)

// defaultOutage is the length of each outage of the outage tests unless
// WEIR_OUTAGE_SECONDS says otherwise: longer than the lease duration, so
// that a DynamoDB outage outlives the leases, and short enough for CI.
const defaultOutage = 4 * time.Second

// outageShards is the outage tests' stream size.
const outageShards = 4

// TestOutageDynamoDB takes DynamoDB away from a running child (directory
// recovery log) while records keep arriving: first down (connections
// refused and cut), then partitioned (connections held silent), each for
// the outage length; after each it must catch up and have logged a
// warning during the outage; at the end every record is checked (G1 to G4).
func TestOutageDynamoDB(t *testing.T) { outage(t, false, "DynamoDB") }

// TestOutageDynamoDBDynamoLog is TestOutageDynamoDB with the recovery log
// in DynamoDB, so the outage also stops the log's appends.
func TestOutageDynamoDBDynamoLog(t *testing.T) { outage(t, true, "DynamoDB") }

// TestOutageKinesis is TestOutageDynamoDB with Kinesis taken away.
func TestOutageKinesis(t *testing.T) { outage(t, false, "Kinesis") }

// TestOutageKinesisDynamoLog is TestOutageKinesis with the recovery log in
// DynamoDB.
func TestOutageKinesisDynamoLog(t *testing.T) { outage(t, true, "Kinesis") }

// outageLength returns the length of each outage: WEIR_OUTAGE_SECONDS, or
// defaultOutage.
func outageLength(t *testing.T) time.Duration {
	t.Helper()
	return time.Duration(envInt(t, "WEIR_OUTAGE_SECONDS", int(defaultOutage/time.Second))) * time.Second
}

// proxyTo starts a faults.Proxy in front of the server at endpoint (a URL),
// closed when t ends.
func proxyTo(t *testing.T, endpoint string) *faults.Proxy {
	t.Helper()
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	p, err := faults.NewProxy(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// outageFigures sums up one outage.
type outageFigures struct {
	what     string
	mode     faults.Mode
	length   time.Duration
	recovery time.Duration // from the end of the outage until every record put before it was output
	stats    faults.ProxyStats
	warnings int    // WARN and ERROR lines about the service the child logged from the outage's start to its recovery
	first    string // the first of them
	died     bool   // the child exited during the outage (and another was started after it)
}

func (f outageFigures) String() string {
	died := ""
	if f.died {
		died = " (the child died during it and was restarted after)"
	}
	return fmt.Sprintf("%s %v for %v%s: caught up %v after; %d warnings (first: %s); proxy %+v",
		f.what, f.mode, f.length, died, f.recovery.Round(time.Millisecond), f.warnings, f.first, f.stats)
}

// outage runs one child with its endpoint of service (DynamoDB or
// Kinesis) behind a proxy, takes the service down (Refuse) and then
// partitions it (Blackhole), each for outageLength, while a producer keeps
// putting records; after each outage it waits for the child to output
// every record put before its end, and checks that the child warned during
// it. At the end it drains the child and checks the output (G1 to G3), the
// checkpoint journal (G4), the log and the leases.
func outage(t *testing.T, shared bool, service string) {
	t.Parallel()
	d := outageLength(t)
	env := servers.Env(t)
	h := newHarness(t, env, outageShards)
	h.shared = shared
	var p *faults.Proxy
	if service == "DynamoDB" {
		p = proxyTo(t, env.DynamoDBEndpoint)
		h.dynamoEndpoint = p.Endpoint()
	} else {
		p = proxyTo(t, env.KinesisEndpoint)
		h.kinesisEndpoint = p.Endpoint()
	}
	if d < 2*kinesisAttemptTimeout {
		// A partition shorter than the default attempt timeout would end
		// before any Kinesis or DynamoDB log attempt gave up, and nothing
		// would be worth a warning: a short test shortens the timeout
		// (both) with it.
		h.tuning.attempt = d / 4
	}
	prod, stopProducer := startProducer(t, h)
	defer stopProducer()
	c := h.start()
	h.awaitBatches(c, 1)
	var all []outageFigures
	for _, mode := range []faults.Mode{faults.Refuse, faults.Blackhole} {
		var f outageFigures
		f, c = h.outage(c, p, service, mode, d, prod)
		report(t, fmt.Sprintf("outage (shared log %v): %v", shared, f))
		all = append(all, f)
	}
	stopProducer()
	put, maybe, maxSeq := prod.snapshot()
	h.awaitOutput(c, put)
	c.term()
	// Every block stored before an outage completes in this process, and
	// a lease the outage made expire is taken back after what this worker
	// added to blocks, even with a DynamoDB log the same outage stalled:
	// no record may come twice.
	fig := h.check(put, maybe)
	h.checkLog()
	h.checkLeases(maxSeq)
	h.checkJournal()
	report(t, fmt.Sprintf("outages of %s (shared log %v), %v each: %v; checkpoint writes %d", service, shared, d, fig, h.checkpoints))
	for _, f := range all {
		// A short partition can end before any call's attempt timeout and
		// period add up to a failure worth a line (CI's 4 s, under load):
		// warnings are required from a refused connection at once, and
		// from a partition of 10 s or more (WEIR_OUTAGE_SECONDS).
		due := f.mode == faults.Refuse || f.length >= 10*time.Second
		if due && f.warnings == 0 && !f.died { // a death is reported already
			t.Errorf("%s %v for %v: the child logged no warning about %s (its stderr, at WARN, must show what stalls)", f.what, f.mode, f.length, f.what)
		}
	}
}

// outage takes the service behind p away from child c in mode for d, then
// gives it back and waits until the child output every record prod put
// before, and returns the figures and the child running then. A child
// that exits during the outage fails the test; another is started once
// the outage is over, so that the next outage and the final checks still
// run (the figures say it died).
func (h *harness) outage(c *child, p *faults.Proxy, service string, mode faults.Mode, d time.Duration, prod *producer) (outageFigures, *child) {
	t := h.t
	t.Helper()
	f := outageFigures{what: service, mode: mode, length: d}
	from := fileSize(t, c.stderr)
	stderr := c.stderr
	before := p.Stats()
	p.Set(mode)
	timer := time.NewTimer(d) // the outage's length: the test's input
	select {
	case <-timer.C:
	case <-c.exited:
		f.died = true
		t.Errorf("child %d exited during a %s outage (%v): %v\n%s", c.n, service, mode, c.err, c.tail())
		<-timer.C
	}
	p.Set(faults.Pass)
	healed := time.Now()
	if f.died {
		c = h.start()
	}
	put, _, _ := prod.snapshot()
	h.awaitOutput(c, put)
	f.recovery = time.Since(healed)
	after := p.Stats()
	f.stats = faults.ProxyStats{Accepted: after.Accepted - before.Accepted, Refused: after.Refused - before.Refused, Cut: after.Cut - before.Cut}
	f.warnings, f.first = warnings(t, stderr, from, service)
	return f, c
}

// fileSize returns the size of the file at path.
func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// warnings returns the number of WARN and ERROR lines a child's slog text
// handler wrote to the file at path from offset from on about service
// (see aboutService), and the message of the first.
func warnings(t *testing.T, path string, from int64, service string) (n int, first string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for l := range strings.Lines(string(data[from:])) {
		if !strings.Contains(l, " level=WARN ") && !strings.Contains(l, " level=ERROR ") {
			continue
		}
		_, msg, _ := strings.Cut(l, " msg=")
		msg, _, _ = strings.Cut(strings.TrimPrefix(msg, `"`), `"`)
		if !aboutService(service, msg, l) {
			continue
		}
		if n++; n == 1 {
			first = msg
		}
	}
	return n, first
}

// aboutService reports whether a log line with message msg is about an
// outage of service: for DynamoDB, the lease table's, the DynamoDB log's
// or a lease's warnings; for Kinesis, the Kinesis calls' (they name the
// operation).
func aboutService(service, msg, line string) bool {
	if service == "DynamoDB" {
		return strings.HasPrefix(msg, "leasetable:") || strings.HasPrefix(msg, "dynamolog:") || strings.Contains(msg, "lease")
	}
	return strings.HasPrefix(msg, "kinesis:") && strings.Contains(line, " op=")
}
