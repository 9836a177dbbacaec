//go:build unix

package crashtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/stream"
)

// The output file of the crash tests is append-only text, one line each:
//
//	start <label>            a process (or an in-process run) opened the file
//	#torn                    the file did not end with a newline at open: the
//	                         line before is the torn tail of a killed write
//	begin <time>             an output started the batch at <time> (ms)
//	r <id> <shard>           one record of the batch, in batch order
//	end <time>               the batch's output finished (fsync follows)
//	done <time>              the driver logged the batch's completion (a
//	                         stream.Listener's BatchCompleted, see doneListener)
const (
	lineStart = "start"
	lineTorn  = "#torn"
	lineBegin = "begin"
	lineRec   = "r"
	lineEnd   = "end"
	lineDone  = "done"
)

// errCrashed is returned by a batchFile's writes once its run has crashed:
// a dead process writes nothing.
var errCrashed = errors.New("crashtest: the pipeline crashed")

// batchFile is the output of the test pipeline: it appends every batch it
// is given to a file opened with O_APPEND, and fsyncs at the end of each.
type batchFile struct {
	f *os.File
	// slow is a pause after "begin" and before "end", so that kills often
	// land inside an output: the workload of a slow sink, not a wait.
	slow time.Duration
	// crashed, if not nil, reports that the run is dead: writes fail.
	crashed *atomic.Bool
}

// openBatchFile opens path for appending, marks a torn last line, and
// writes the start line naming label.
func openBatchFile(path, label string, slow time.Duration, crashed *atomic.Bool) (*batchFile, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	torn, err := endsTorn(path)
	if err == nil && torn {
		_, err = f.WriteString("\n" + lineTorn + "\n")
	}
	if err == nil {
		_, err = f.WriteString(lineStart + " " + label + "\n")
	}
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("crashtest: open output %s: %w", path, err)
	}
	return &batchFile{f: f, slow: slow, crashed: crashed}, nil
}

// endsTorn reports whether the file at path is not empty and does not end
// with a newline.
func endsTorn(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return false, err
	}
	var last [1]byte
	if _, err := f.ReadAt(last[:], st.Size()-1); err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	return last[0] != '\n', nil
}

// Close closes the file.
func (w *batchFile) Close() error { return w.f.Close() }

// write appends s unless the run crashed.
func (w *batchFile) write(s string) error {
	if w.crashed != nil && w.crashed.Load() {
		return errCrashed
	}
	_, err := w.f.WriteString(s)
	return err
}

// pause waits w.slow or until ctx is done.
func (w *batchFile) pause(ctx context.Context) error {
	if w.slow <= 0 {
		return nil
	}
	return clock.Sleep(ctx, clock.Real{}, w.slow)
}

// Write is the pipeline's output: begin, the records in chunks, end, fsync.
func (w *batchFile) Write(ctx context.Context, b *batch.Batch[kinesis.Record]) error {
	tm := strconv.FormatInt(int64(b.Time()), 10)
	if err := w.write(lineBegin + " " + tm + "\n"); err != nil {
		return err
	}
	if err := w.pause(ctx); err != nil {
		return err
	}
	var sb strings.Builder
	n := 0
	for r := range b.All() {
		sb.WriteString(lineRec + " " + string(r.Data) + " " + r.ShardID + "\n")
		if n++; n%32 == 0 {
			if err := w.write(sb.String()); err != nil {
				return err
			}
			sb.Reset()
		}
	}
	if err := w.write(sb.String()); err != nil {
		return err
	}
	if err := w.pause(ctx); err != nil {
		return err
	}
	if err := w.write(lineEnd + " " + tm + "\n"); err != nil {
		return err
	}
	return w.f.Sync()
}

// done appends the done line of the batch at t, unless the run crashed.
func (w *batchFile) done(t batch.Time) error {
	return w.write(lineDone + " " + strconv.FormatInt(int64(t), 10) + "\n")
}

// doneListener records in the output file every batch whose completion
// the driver logged: stream's engine calls BatchCompleted, with Err nil,
// only after the completion was appended to the recovery log (and the
// receivers were told), from the goroutine that runs the outputs, so the
// done line follows the batch's end line and comes before the next begin.
type doneListener struct {
	stream.NopListener
	out *batchFile
}

// BatchCompleted appends the batch's done line if it succeeded. A failed
// write (the run crashed) leaves the line out, which only weakens the
// check.
func (l doneListener) BatchCompleted(info stream.BatchInfo) {
	if info.Err == nil {
		_ = l.out.done(info.Time)
	}
}
