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

// earlyReceiver is a receiver whose Start returns nil at once, without
// being asked to stop.
type earlyReceiver struct{}

func (earlyReceiver) Start(context.Context, source.Runtime[string]) error { return nil }
func (earlyReceiver) Stop(context.Context) error                          { return nil }
func (earlyReceiver) Recompute(context.Context, batch.BlockInfo) ([]string, error) {
	return nil, errNoBlock
}

// TestReceiverEndingEarlyWarns runs a pipeline whose receiver's Start
// returns nil without being asked to stop: its source delivers nothing
// more, which the driver warns about once, not once a batch; a drain's
// stop of a receiver is not warned about.
func TestReceiverEndingEarlyWarns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := &logLines{}
		p, err := NewPipeline(Config{BatchInterval: time.Second, Logger: logs.logger()})
		if err != nil {
			t.Fatal(err)
		}
		discard := func(context.Context, *batch.Batch[string]) error { return nil }
		ForEachBatch(From[string](p, earlyReceiver{}), discard)
		ForEachBatch(From(p, newTestReceiver[string]()), discard)
		errc := start(t, p)
		time.Sleep(10 * time.Second)
		if err := p.Drain(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		warned := logs.matching("level=WARN", "Start returned")
		if len(warned) != 1 || !strings.Contains(warned[0], "source=0") {
			t.Errorf("want one warning of source 0's receiver ending early; WARN lines:\n%s",
				strings.Join(logs.matching("level=WARN"), ""))
		}
	})
}
