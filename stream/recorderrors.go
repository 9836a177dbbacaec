package stream

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/noretry"
)

// RecordErrors is the error a ForEachBatch function returns to say that
// some records of its batch can never be output, such as records a sink
// refuses (too large, a key the store does not take), and why: Errs maps
// the index of each such record in the batch, in the order of All, to its
// error. Returning it, the function says that, called again with the
// batch of the other records (in the same order, with their Origins; the
// batch batch.Batch.Keep makes), it outputs them. Every record it wrote
// before returning RecordErrors is written again by that call, as by a
// retry: a function that can tell a record will be refused before writing
// it returns RecordErrors before writing anything (ExampleRecordErrors);
// one that learns it only from its target's answer sends the others
// again, which its target must tolerate as it tolerates a retry
// (sink/dynamodb, which returns RecordErrors so, skips what it applied;
// sink/kinesis writes it again, with origin tags by which a reader drops
// the copies). The indexes are those of the batch the
// function was given: a function returning a sink's RecordErrors gives
// the sink that batch, whole, in one Write, or maps the indexes back. A
// function that writes the records it can and deals with the others
// itself returns nil (see batch.Batch.Keep).
//
// The output does not try a batch again for it (Retry): a record that can
// never be output is refused at every try. With Quarantine, the function
// is called again at once with the batch of the others (tried again as
// the output's Retry says), and each of those records is sent to the dead
// letters with its own error (and its origin, if the batch has Origins:
// see DeadLetter's Range); the batch then completes. Without RecordErrors the
// unit of a ForEachBatch function's failure is the whole batch: every
// record would be quarantined. A later call that returns RecordErrors sets
// those records aside too; another error, once the retries are spent,
// quarantines the records left, as a whole, unless the Run stops
// meanwhile: then nothing of the batch is quarantined, and the batch is
// not done. Without Quarantine it fails the batch at once. sink/kinesis
// and sink/dynamodb return it for the records they refuse.
type RecordErrors struct {
	Errs map[int]error
}

// Error describes the first record's error, by index, and how many more
// records failed.
func (e *RecordErrors) Error() string {
	idx := e.indexes()
	switch len(idx) {
	case 0:
		return "no record failed"
	case 1:
		return e.errOf(idx[0]).Error()
	}
	return fmt.Sprintf("%d records refused, the first: %v", len(idx), e.errOf(idx[0]))
}

// Unwrap returns the records' errors, in the order of their indexes, so
// that errors.Is and errors.As see each.
func (e *RecordErrors) Unwrap() []error {
	var errs []error
	for _, i := range e.indexes() {
		if err := e.Errs[i]; err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// errOf returns the error of the record of index i, one saying so if Errs
// holds none (nil).
func (e *RecordErrors) errOf(i int) error {
	if err := e.Errs[i]; err != nil {
		return err
	}
	return fmt.Errorf("record %d refused, with no error given", i)
}

// indexes returns the indexes of e's records, ascending.
func (e *RecordErrors) indexes() []int {
	idx := make([]int, 0, len(e.Errs))
	for i := range e.Errs {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	return idx
}

// refusedLetters returns the letters of b's records, the output's
// function having failed on b with err: those err names, if it is a
// RecordErrors naming records of b, each with its own error, and then,
// the function called again with the batch of the others (again), the
// letters of those it names in turn, until it outputs the batch left (or
// it is empty); any other error quarantines the batch left as a whole,
// with that error, as it does the first batch. A letter of a record with
// an origin (b's Origins) names it (see originRange). A call that fails for a
// reason of no record's (the Run stopping, a refused configuration: an
// error for which stop reports true) quarantines nothing: refusedLetters
// returns that error.
func refusedLetters[T any](b *batch.Batch[T], err error, again func(*batch.Batch[T]) error, stop func(error) bool) ([]DeadLetter, error) {
	var letters []DeadLetter
	for {
		if stop(err) {
			return nil, err
		}
		re, ok := errors.AsType[*RecordErrors](err)
		origins := b.Origins()
		if !ok || len(re.Errs) == 0 || len(re.Errs) > b.Len() || slices.ContainsFunc(re.indexes(), func(i int) bool { return i < 0 || i >= b.Len() }) {
			whole := lettersOf(b.All(), batch.SeqRange{}, err)
			for i, o := range origins {
				whole[i].Range, whole[i].Offset = originRange(o)
			}
			return append(letters, whole...), nil
		}
		i := 0
		for v := range b.All() {
			if _, ok := re.Errs[i]; ok {
				l := letterOf(v, re.errOf(i))
				if origins != nil {
					l.Range, l.Offset = originRange(origins[i])
				}
				letters = append(letters, l)
			}
			i++
		}
		b = b.Keep(func(i int, _ T) bool { _, refused := re.Errs[i]; return !refused })
		if b.Len() == 0 {
			return letters, nil
		}
		if err = again(b); err == nil {
			return letters, nil
		}
	}
}

// originRange returns the Range and Offset of the letter of a record of
// origin o (see DeadLetter): the records of o's sequence number, up to o's
// sub-record, and its place among them; none for a record without origin.
func originRange(o batch.Origin) (batch.SeqRange, int) {
	if o.Seq == "" {
		return batch.SeqRange{}, 0
	}
	return batch.SeqRange{Stream: o.Stream, Shard: o.Shard, First: o.Seq, Last: o.Seq, Count: int(o.SubSeq) + 1}, int(o.SubSeq)
}

// stopsOutput reports whether err, the error of output's function in r,
// is no record's: the Run stops, or a refused configuration (the same at
// every try), which fails the output rather than quarantine its records.
func stopsOutput(r *run) func(error) bool {
	return func(err error) bool { return r.ctx.Err() != nil || noretry.Is(err) }
}

// callAgain returns a call of output o's function f, with ctx, on a batch
// of r's time, tried again as o's Retry says (see refusedLetters).
func callAgain[T any](ctx context.Context, r *run, o *output, f func(context.Context, *batch.Batch[T]) error) func(*batch.Batch[T]) error {
	return func(b *batch.Batch[T]) error {
		return o.retry(r, func() error { return refusing(safely(func() error { return f(ctx, b) })) }, func() int { return 1 })
	}
}

// refusal is the error of a ForEachBatch function that names records it
// refuses with a RecordErrors: the output does not try it again (retry).
// Only the function's own error is one: a RecordErrors that computing its
// stream failed with (a Transform's function's) names records of another
// batch, and is that of the batch, which the output tries again.
type refusal struct{ err error }

func (e *refusal) Error() string { return e.err.Error() }
func (e *refusal) Unwrap() error { return e.err }

// refusing returns err, the error of an output's function, as a refusal
// if it is a RecordErrors.
func refusing(err error) error {
	if _, ok := errors.AsType[*RecordErrors](err); ok {
		return &refusal{err}
	}
	return err
}
