package kinesis

import (
	"testing"
	"testing/synctest"

	"github.com/weirstream/weir/batch"
)

// TestBudgetAccounting checks the byte budget's bookkeeping: reservations
// wait while the budget is full and are woken by a release or a
// completion; delivered ranges hold their actual bytes in place of their
// reservation; a completion gives back each range once, a range read twice
// twice, and a range never delivered nothing.
func TestBudgetAccounting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		b := newBudget()
		b.setLimit(100)
		r1 := batch.SeqRange{Shard: "a", First: "1", Last: "5"}
		r2 := batch.SeqRange{Shard: "b", First: "1", Last: "5"}
		reserveAsync := func(n int64) chan error {
			c := make(chan error, 1)
			go func() { c <- b.reserve(ctx, n) }()
			synctest.Wait()
			return c
		}
		waiting := func(c chan error) bool {
			select {
			case err := <-c:
				if err != nil {
					t.Fatal(err)
				}
				return false
			default:
				return true
			}
		}
		if err := b.reserve(ctx, 60); err != nil {
			t.Fatal(err)
		}
		c := reserveAsync(60)
		if !waiting(c) {
			t.Fatal("a reservation past the budget did not wait")
		}
		b.take(r1, 30, 60) // the page was smaller than reserved: room for 60 again
		synctest.Wait()
		if waiting(c) {
			t.Fatal("a reservation still waits after a page took less than its reservation")
		}
		b.take(r2, 80, 60) // larger than reserved: held anyway
		b.take(r2, 10, 0)  // the same range read again
		if used, peak := b.usage(); used != 120 || peak != 120 {
			t.Errorf("usage %d, peak %d; want 120, 120", used, peak)
		}
		c = reserveAsync(1)
		if !waiting(c) {
			t.Fatal("a reservation went through with the budget overrun")
		}
		b.giveBack([]batch.SeqRange{{Shard: "c", First: "1", Last: "2"}}) // never delivered: nothing
		if used, _ := b.usage(); used != 120 {
			t.Errorf("usage %d after a completion of a range never delivered, want 120", used)
		}
		b.giveBack([]batch.SeqRange{r2}) // r2's first read: 80
		synctest.Wait()
		if waiting(c) {
			t.Fatal("a reservation still waits with 40 bytes used of 100")
		}
		b.release(1)
		b.giveBack([]batch.SeqRange{r2, r1}) // r2's second read, and r1
		if used, peak := b.usage(); used != 0 || peak != 120 {
			t.Errorf("usage %d, peak %d after every range completed; want 0, 120", used, peak)
		}
		if b.reserved != 0 {
			t.Errorf("%d bytes still reserved, want 0", b.reserved)
		}
	})
}
