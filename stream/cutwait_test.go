package stream

import (
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirstream/weir/internal/recoverylog"
)

// TestHungLogWarns runs a pipeline whose recovery log stops answering (a
// hung disk under recovery.Dir, say): a block's append waits, and the batch
// timer waits for it before it cuts the batch the block is in. Nothing runs,
// and the driver warns that the cut waits at 1, 2 and 4 minutes; once the
// log answers again the pipeline goes on.
func TestHungLogWarns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := &logLines{}
		store := recoverylog.NewMemory()
		release := make(chan struct{})
		var hang atomic.Bool
		store.SetAppendHook(func(int, []recoverylog.Entry) recoverylog.Fault {
			if hang.Load() {
				<-release
			}
			return recoverylog.Fault{}
		})
		p, r, s := newTest[string](t, Config{BatchInterval: time.Second, Recovery: store,
			Logger: logs.logger()})
		c := collect(s)
		errc := start(t, p)
		time.Sleep(1500 * time.Millisecond)
		hang.Store(true)
		pushed := make(chan error, 1)
		go func() {
			tp := testPush[string]{recs: []string{"a"}, ack: make(chan error, 1)}
			r.in <- tp
			pushed <- <-tp.ack
		}()
		time.Sleep(5 * time.Minute)
		warned := logs.matching("level=WARN", "recovery log")
		if len(warned) != 3 {
			t.Errorf("a log hung for 5 minutes logged %d warnings, want 3 (at 1, 2 and 4 minutes); WARN lines:\n%s",
				len(warned), strings.Join(logs.matching("level=WARN"), ""))
		}
		hang.Store(false)
		close(release)
		if err := <-pushed; err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		if got := records(c); len(got) != 1 {
			t.Errorf("records output once the log answered: %v, want [a]", got)
		}
		p.Stop()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	})
}
