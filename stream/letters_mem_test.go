package stream

import (
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/weirstream/weir/batch"
)

// TestLettersOfShareFailure checks that the letters of records quarantined
// together (a ForEachBatch or Print batch, a ForEachPartition partition)
// share their failure's text, panic value and stack instead of holding a
// copy each: with every record of a big batch failing, copies made the
// letters take the stack's size times the batch's records.
func TestLettersOfShareFailure(t *testing.T) {
	const n, stackBytes = 10_000, 8 << 10
	recs := make([][]byte, n)
	for i := range recs {
		recs[i] = []byte("r")
	}
	err := &panicError{Value: strings.Repeat("v", 1<<10), Stack: []byte(strings.Repeat("s", stackBytes))}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	letters := lettersOf(slices.Values(recs), batch.SeqRange{}, err)
	runtime.ReadMemStats(&after)
	if len(letters) != n || letters[n-1].Stack != string(err.Stack) || letters[n-1].Panic != err.Value || letters[n-1].Err != err.Error() {
		t.Fatalf("got %d letters, the last %+v", len(letters), letters[n-1])
	}
	t.Logf("allocated %d bytes", after.TotalAlloc-before.TotalAlloc)
	if got, most := after.TotalAlloc-before.TotalAlloc, uint64(n*stackBytes/4); got > most {
		t.Errorf("%d letters of one failure allocated %d bytes, want at most %d: the failure's stack is copied into each", n, got, most)
	}
	runtime.KeepAlive(letters)
}
