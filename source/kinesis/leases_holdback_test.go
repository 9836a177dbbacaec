package kinesis_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/source/kinesis"
)

// heldPages is a Kinesis client whose GetRecords answers with records,
// once armed, wait until the test releases them, whatever the caller's
// ctx: a reader that read records and checks its lease only after a change
// of the lease the test brings about meanwhile.
type heldPages struct {
	kinesis.Client

	mu       sync.Mutex
	armed    bool
	waiting  int
	released chan struct{}
}

func newHeldPages(c kinesis.Client) *heldPages {
	return &heldPages{Client: c, released: make(chan struct{})}
}

func (c *heldPages) GetRecords(ctx context.Context, in *awskinesis.GetRecordsInput, o ...func(*awskinesis.Options)) (*awskinesis.GetRecordsOutput, error) {
	out, err := c.Client.GetRecords(ctx, in, o...)
	if err != nil || len(out.Records) == 0 {
		return out, err
	}
	c.mu.Lock()
	armed, released := c.armed, c.released
	if armed {
		c.waiting++
	}
	c.mu.Unlock()
	if armed {
		guard := time.NewTimer(deadline)
		defer guard.Stop()
		select {
		case <-released:
		case <-guard.C:
		}
	}
	return out, err
}

func (c *heldPages) arm() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armed = true
}

// held returns how many answers with records wait.
func (c *heldPages) held() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.waiting
}

// release lets the answers through, and those to come; idempotent.
func (c *heldPages) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.armed {
		c.armed = false
		close(c.released)
	}
}

const (
	heldNotRenewed = `level=WARN msg="kinesis: lease not renewed within its duration; holding back records"`
	heldHandOff    = `level=INFO msg="kinesis: the shard's lease is being handed off to another worker; holding back records until its reader stops"`
	heldUnvouched  = `level=INFO msg="kinesis: the shard's lease, just taken, is trusted once this worker's next beat succeeds; holding back records until then"`
)

// startReading starts a worker whose logs (INFO and above) are returned
// and whose Kinesis answers with records are held once it holds all the
// fleet's shards' leases, and puts records: it returns once each of its
// readers waits for an answer with records (pages.release lets them go).
func startReading(f *fleet, id string, shards int) (w *worker, logs *logBuffer, pages *heldPages) {
	f.t.Helper()
	logs = &logBuffer{}
	w = f.start(id, 2*time.Second, func(c *kinesis.Config) {
		c.Leases.CheckpointInterval = time.Minute
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
		pages = newHeldPages(c.Client)
		c.Client = pages
	})
	f.t.Cleanup(pages.release)
	f.waitFor(id+" holds every lease", func() bool { return len(w.held()) == shards })
	pages.arm()
	f.put(payloads("holdback", 100*shards))
	f.waitFor("each of "+id+"'s readers read records", func() bool { return pages.held() == shards })
	return w, logs, pages
}

// waitHeldBack waits until logs say that a reader holds back records.
func (f *fleet) waitHeldBack(logs *logBuffer) {
	f.t.Helper()
	f.waitFor("a reader holds back the records it read", func() bool {
		return strings.Contains(logs.String(), heldHandOff) || strings.Contains(logs.String(), heldNotRenewed)
	})
}

// A reader whose lease another worker asked for (a graceful hand-off) and
// that reads records before the assigner stops it holds them back, as it
// must, and says so as information: nothing is wrong, the lease is
// renewed, and the new owner reads them after the last checkpoint.
// Before, it warned that the lease was not renewed within its duration.
func TestLeasesHandOffHoldBackLogsInfo(t *testing.T) {
	t.Parallel()
	f := newFleet(t, 2)
	w1, logs, pages := startReading(f, "w1", 2)
	w2 := f.start("w2", 2*time.Second, nil)
	f.waitFor("w1 learns that w2 asks for a lease", func() bool {
		return strings.Contains(logs.String(), `msg="leasetable: another worker asked for a lease`)
	})
	pages.release()
	f.waitHeldBack(logs)
	f.waitFor("w2 reads a shard", func() bool { return len(w2.held()) == 1 })
	w2.drain(t)
	w1.drain(t)
	heldBackAsInfo(t, "w1", logs, heldHandOff)
}

// heldBackAsInfo checks that worker's logs say want and never warn that a
// lease went unrenewed.
func heldBackAsInfo(t *testing.T, worker string, logs *logBuffer, want string) {
	t.Helper()
	for line := range strings.Lines(logs.String()) {
		if strings.Contains(line, heldNotRenewed) {
			t.Errorf("%s warned that a lease of a graceful hand-off was not renewed: %s", worker, line)
		}
	}
	if !strings.Contains(logs.String(), want) {
		t.Errorf("%s did not log %s", worker, want)
	}
}

// A reader whose lease really went unrenewed (its worker cut off from
// DynamoDB) still warns when it holds back what it read.
func TestLeasesNotRenewedHoldBackWarns(t *testing.T) {
	t.Parallel()
	f := newFleet(t, 1)
	w, logs, pages := startReading(f, "w", 1)
	w.ddb.gate.pause()
	f.waitFor("w counts its lease lost", func() bool { return len(w.held()) == 0 })
	pages.release()
	f.waitHeldBack(logs)
	w.ddb.gate.resume()
	w.kill()
	if !strings.Contains(logs.String(), heldNotRenewed) {
		t.Errorf("w did not warn that its lease went unrenewed: want %s", heldNotRenewed)
	}
	if strings.Contains(logs.String(), heldHandOff) {
		t.Errorf("w logged a hand-off of a lease it lost: %s", heldHandOff)
	}
}

// lateBeats is a lease table client whose beats wait, once its worker
// took a lease (a take names it the owner), until the test releases them:
// the worker's first beat after the take is late.
type lateBeats struct {
	leasetable.DynamoDBAPI
	worker string

	mu       sync.Mutex
	took     bool
	released chan struct{}
}

func (c *lateBeats) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	expr := aws.ToString(in.UpdateExpression)
	c.mu.Lock()
	took := c.took
	c.mu.Unlock()
	if took && strings.HasPrefix(expr, "ADD #a0 :one") { // a beat (lease.Table.beat)
		select {
		case <-c.released:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	out, err := c.DynamoDBAPI.UpdateItem(ctx, in, o...)
	owner, ok := in.ExpressionAttributeValues[":newowner"].(*ddbtypes.AttributeValueMemberS)
	if err == nil && ok && owner.Value == c.worker && !strings.Contains(expr, "#ckptowner = :owner") { // a take, not a request
		c.mu.Lock()
		c.took = true
		c.mu.Unlock()
	}
	return out, err
}

// The worker a lease is handed off to takes a lease the table names it
// the owner of already (it asked for it), which it trusts only once its
// next beat succeeds: its reader holds back what it reads until then, and
// says so as information. Before, it warned that the lease was not renewed
// within its duration. Here the new owner's beats after its take wait
// until its reader held back records.
func TestLeasesHandedOffToHoldBackLogsInfo(t *testing.T) {
	t.Parallel()
	f := newFleet(t, 2)
	aLogs, bLogs := &logBuffer{}, &logBuffer{}
	infoTo := func(logs *logBuffer) *slog.Logger {
		return slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	a := f.start("a", 2*time.Second, func(c *kinesis.Config) { c.Logger = infoTo(aLogs) })
	f.waitFor("a holds both leases", func() bool { return len(a.held()) == 2 })
	beats := &lateBeats{worker: "b", released: make(chan struct{})}
	var once sync.Once
	release := func() { once.Do(func() { close(beats.released) }) }
	t.Cleanup(release)
	b := f.start("b", 2*time.Second, func(c *kinesis.Config) {
		c.Logger = infoTo(bLogs)
		beats.DynamoDBAPI = c.Leases.DynamoDB
		c.Leases.DynamoDB = beats
	})
	f.waitFor("a learns that b asks for a lease", func() bool {
		return strings.Contains(aLogs.String(), `msg="leasetable: another worker asked for a lease`)
	})
	f.put(payloads("handedto", 200)) // a delivers none of the shard asked for now
	f.waitFor("b holds back the records of the shard handed off to it", func() bool {
		return strings.Contains(bLogs.String(), heldUnvouched) || strings.Contains(bLogs.String(), heldNotRenewed)
	})
	release()
	f.waitFor("b reads a shard", func() bool { return len(b.held()) == 1 })
	b.drain(t)
	a.drain(t)
	heldBackAsInfo(t, "b", bLogs, heldUnvouched)
}
