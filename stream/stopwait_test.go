package stream

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/source"
)

// deafReceiver is a receiver whose Start ignores its ctx and Stop: it
// returns only once release is closed.
type deafReceiver struct{ release chan struct{} }

func (r deafReceiver) Start(context.Context, source.Runtime[string]) error {
	<-r.release
	return nil
}
func (deafReceiver) Stop(context.Context) error { return nil }
func (deafReceiver) Recompute(context.Context, batch.BlockInfo) ([]string, error) {
	return nil, errNoBlock
}

// startDeaf runs, for 3 seconds, a pipeline logging to logs whose one
// source's receiver is a deafReceiver, and returns the pipeline, the
// receiver and Run's result.
func startDeaf(t *testing.T, logs *logLines) (*Pipeline, deafReceiver, <-chan error) {
	t.Helper()
	p, err := NewPipeline(Config{BatchInterval: time.Second, Logger: logs.logger()})
	if err != nil {
		t.Fatal(err)
	}
	r := deafReceiver{release: make(chan struct{})}
	ForEachBatch(From[string](p, r), func(context.Context, *batch.Batch[string]) error { return nil })
	errc := start(t, p)
	time.Sleep(3 * time.Second)
	return p, r, errc
}

// checkReceiverWaitWarned fails t unless logs holds three warnings that
// the driver waits for source 0's receiver, as a wait of 5 minutes (what
// waited) logs: at 1, 2 and 4 minutes.
func checkReceiverWaitWarned(t *testing.T, logs *logLines, what string) {
	t.Helper()
	warned := logs.matching("level=WARN", "waits for", "sources=[0]")
	if len(warned) != 3 {
		t.Errorf("%s waiting 5 minutes for a receiver logged %d such warnings, want 3 (at 1, 2 and 4 minutes); WARN lines:\n%s",
			what, len(warned), strings.Join(logs.matching("level=WARN"), ""))
	}
}

// TestStopWaitingForReceiverWarns stops a pipeline whose receiver's Start
// ignores its ctx: Run cannot return, and the driver warns that it waits
// for that receiver after 1, 2 and 4 minutes, not never and not once a
// check; Run returns nil once the receiver does.
func TestStopWaitingForReceiverWarns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := &logLines{}
		p, r, errc := startDeaf(t, logs)
		p.Stop()
		time.Sleep(5 * time.Minute)
		checkReceiverWaitWarned(t, logs, "a stopped Run")
		close(r.release)
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	})
}

// TestDrainWaitingForReceiverWarns drains, with no bound, a pipeline whose
// receiver's Start does not return: the drain cannot finish, and the
// driver warns that it waits for that receiver after 1, 2 and 4 minutes.
func TestDrainWaitingForReceiverWarns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := &logLines{}
		p, r, errc := startDeaf(t, logs)
		drained := make(chan error, 1)
		go func() { drained <- p.Drain(context.Background()) }()
		time.Sleep(5 * time.Minute)
		checkReceiverWaitWarned(t, logs, "a drain")
		close(r.release)
		if err := <-drained; err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	})
}
