//go:build unix

package crashtest

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// rec is one record line of the output.
type rec struct {
	id    int64
	shard string
}

// batchRun is one run of a batch's output as the file shows it.
type batchRun struct {
	time     int64
	proc     int // index of the process (start line) that ran it
	line     int // line number of its begin, from 1
	records  []rec
	complete bool // reached its end line
	done     int  // line number of its done line (completion logged), 0 if none
	torn     bool // a torn line was dropped from it
}

// maxEmptyRerun is the longest span, in milliseconds, of the empty batches
// logged complete that a stateful pipeline's restart may run again: those
// of one run of empty batches, whose entry names the batch times from its
// first up to 10 s ahead (DESIGN.md, Recovery).
const maxEmptyRerun = 10_000

// transcript is the parsed output file.
type transcript struct {
	runs  []*batchRun
	procs int // start lines
	torn  int // torn lines dropped
	// stateful is set for the output of a pipeline with state, whose
	// empty batches of a run of empty batches may run again after their
	// done line (G3; DESIGN.md, Recovery), empty again.
	stateful bool
}

// parseOutput parses the output file. The torn tail of a killed write is
// dropped: the line before a "#torn" line, and a last line without a
// newline. Anything else out of place is an error.
func parseOutput(data string) (*transcript, error) {
	lines := strings.Split(data, "\n")
	tr := &transcript{}
	tornTail := lines[len(lines)-1] != ""
	if tornTail {
		tr.torn++ // the child was killed while writing it, and not restarted
	}
	lines = lines[:len(lines)-1]
	dropped := make([]bool, len(lines))
	for i, l := range lines {
		if l == lineTorn {
			if i == 0 {
				return nil, fmt.Errorf("line 1: %s with no line before it", lineTorn)
			}
			dropped[i-1], dropped[i] = true, true
			tr.torn++
		}
	}
	var open *batchRun
	for i, l := range lines {
		if dropped[i] {
			if open != nil {
				open.torn = true
			}
			continue
		}
		n := i + 1
		kind, rest, _ := strings.Cut(l, " ")
		switch kind {
		case lineStart:
			open = nil // a run still open was cut short by a crash
			tr.procs++
		case lineBegin:
			tm, err := strconv.ParseInt(rest, 10, 64)
			if err != nil || open != nil || tr.procs == 0 {
				return nil, fmt.Errorf("line %d: %q: begin inside a run, before a start, or a bad time", n, l)
			}
			open = &batchRun{time: tm, proc: tr.procs - 1, line: n}
			tr.runs = append(tr.runs, open)
		case lineRec:
			r, err := parseRec(rest)
			if err != nil || open == nil {
				return nil, fmt.Errorf("line %d: %q: a record outside a run, or malformed", n, l)
			}
			open.records = append(open.records, r)
		case lineEnd:
			tm, err := strconv.ParseInt(rest, 10, 64)
			if err != nil || open == nil || tm != open.time {
				return nil, fmt.Errorf("line %d: %q: does not end the open run", n, l)
			}
			open.complete = true
			open = nil
		case lineDone:
			if err := markDone(tr, rest, n); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("line %d: %q: unknown line", n, l)
		}
	}
	if tornTail && open != nil {
		open.torn = true
	}
	return tr, nil
}

// markDone marks done the run a done line at line n (its time in rest)
// names: the last complete run of that time by the current process, not
// marked yet. Listener events are delivered asynchronously, so the line may
// come after later runs' lines, even inside one; anything else is an error.
func markDone(tr *transcript, rest string, n int) error {
	tm, err := strconv.ParseInt(rest, 10, 64)
	if err == nil {
		for _, r := range slices.Backward(tr.runs) {
			if r.proc != tr.procs-1 {
				break
			}
			if r.time == tm && r.complete && r.done == 0 {
				r.done = n
				return nil
			}
		}
	}
	return fmt.Errorf("line %d: \"%s %s\": names no complete run of this process not yet done", n, lineDone, rest)
}

// parseRec parses "<id> <shard>"; a shard ID has 20 characters, so a line
// cut short is never taken for a record.
func parseRec(s string) (rec, error) {
	id, shard, ok := strings.Cut(s, " ")
	n, err := strconv.ParseInt(id, 10, 64)
	if !ok || err != nil || len(shard) != len("shardId-000000000000") || !strings.HasPrefix(shard, "shardId-") {
		return rec{}, fmt.Errorf("malformed record %q", s)
	}
	return rec{id: n, shard: shard}, nil
}

// figures sums up a checked output.
type figures struct {
	Put        int // records put for sure
	Maybe      int // records whose put may or may not have succeeded
	Procs      int // processes (or in-process runs) that opened the file
	Batches    int // distinct batch times
	Runs       int // batch runs, re-runs included
	Done       int // runs whose completion the driver logged (done lines)
	Rerun      int // batch times begun more than once
	Duplicates int // record lines beyond the first of each record
	Torn       int // torn lines dropped
}

func (f figures) String() string {
	return fmt.Sprintf("records put %d (+%d uncertain), processes %d, batches %d, runs %d (%d logged complete), re-run batches %d, duplicate records %d, torn lines %d",
		f.Put, f.Maybe, f.Procs, f.Batches, f.Runs, f.Done, f.Rerun, f.Duplicates, f.Torn)
}

// checkOutput checks a transcript against the recovery guarantees, given
// the IDs of the records put for sure and of those whose put is uncertain,
// and returns its figures and every violation found:
//   - every batch time begun has a complete run (but one begun once, empty,
//     without a torn line: an empty batch a kill interrupted, which is not
//     run again); every complete run of a
//     time has exactly the records, in order, of its first complete run
//     (G2), and every incomplete run is a prefix of it;
//   - a time runs again only in a later process, and never after a run
//     whose completion was logged (a done line) (G3), but, in a stateful
//     pipeline, an empty batch, empty again (the empty batches of a run,
//     whose completion no entry logs), those of one run, at most 10 s of
//     them; a run followed by
//     another in its process has a done line (the driver starts a batch
//     only after the one before completed), or the done lines are not
//     to be trusted;
//   - in each process, the re-runs come first, in time order, and then new
//     times, each greater than every time before it in the file;
//   - every record is in exactly one batch time (duplicates only from
//     re-runs), every record put is in a complete run (G1), no record is
//     unknown, and each shard's records come in put (ID) order.
func checkOutput(tr *transcript, put, maybe map[int64]bool) (figures, []error) {
	f := figures{Put: len(put), Maybe: len(maybe), Procs: tr.procs, Runs: len(tr.runs), Torn: tr.torn}
	errs := checkDone(tr)
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	byTime := map[int64][]*batchRun{}
	for _, r := range tr.runs {
		byTime[r.time] = append(byTime[r.time], r)
	}
	for _, r := range tr.runs {
		if r.done != 0 {
			f.Done++
		}
	}
	f.Batches = len(byTime)
	first := map[int64]*batchRun{} // first complete run of each time
	// emptyReruns are, by process, the empty runs of a stateful pipeline
	// of times whose run before was logged complete.
	emptyReruns := map[int][]*batchRun{}
	for _, tm := range slices.Sorted(maps.Keys(byTime)) {
		runs := byTime[tm]
		if len(runs) > 1 {
			f.Rerun++
		}
		for _, r := range runs {
			if r.complete {
				first[tm] = r
				break
			}
		}
		ref := first[tm]
		if ref == nil {
			if len(runs) == 1 && len(runs[0].records) == 0 && !runs[0].torn {
				// An empty batch a kill interrupted: not in the log,
				// not run again (DESIGN.md, Recovery).
				continue
			}
			fail("batch %d: begun %d times (first at line %d), never completed", tm, len(runs), runs[0].line)
			continue
		}
		for i, r := range runs {
			if r.complete && !slices.Equal(r.records, ref.records) {
				fail("batch %d: run at line %d has %d records, not those of its first complete run at line %d (%d records) (G2)",
					tm, r.line, len(r.records), ref.line, len(ref.records))
			}
			if !r.complete && (len(r.records) > len(ref.records) || !slices.Equal(r.records, ref.records[:len(r.records)])) {
				fail("batch %d: incomplete run at line %d is not a prefix of its complete run at line %d (G2)", tm, r.line, ref.line)
			}
			if i == 0 {
				continue
			}
			prev := runs[i-1]
			if prev.proc >= r.proc {
				fail("batch %d: ran again at line %d in the same process as its run at line %d", tm, r.line, prev.line)
			}
			switch {
			case prev.done == 0:
			case tr.stateful && len(prev.records) == 0 && len(r.records) == 0:
				emptyReruns[r.proc] = append(emptyReruns[r.proc], r)
			default:
				fail("batch %d: ran again at line %d, but its run at line %d had its completion logged (done at line %d) (G3)",
					tm, r.line, prev.line, prev.done)
			}
		}
	}
	// The empty batches run again are those of one run of empty batches,
	// at most maxEmptyRerun of them.
	for _, proc := range slices.Sorted(maps.Keys(emptyReruns)) {
		rs := emptyReruns[proc]
		lo := slices.MinFunc(rs, func(a, b *batchRun) int { return cmp.Compare(a.time, b.time) })
		hi := slices.MaxFunc(rs, func(a, b *batchRun) int { return cmp.Compare(a.time, b.time) })
		if hi.time-lo.time > maxEmptyRerun {
			fail("batches %d to %d: %d empty batches logged complete ran again (lines %d to %d), over %d ms of them, more than the %d ms of one run of empty batches (G3)",
				lo.time, hi.time, len(rs), lo.line, hi.line, hi.time-lo.time, maxEmptyRerun)
		}
	}
	errs = append(errs, checkOrder(tr, byTime)...)
	dups, recErrs := checkRecords(first, byTime, put, maybe)
	f.Duplicates = dups
	return f, append(errs, recErrs...)
}

// checkDone checks that every run followed by another in its process has
// a done line: the driver runs a batch only once the one before completed,
// so a missing done line means the completion listener does not record
// every completion, and the G3 check would miss re-runs.
func checkDone(tr *transcript) []error {
	var errs []error
	for i, r := range tr.runs[:max(len(tr.runs)-1, 0)] {
		if next := tr.runs[i+1]; next.proc == r.proc && r.done == 0 {
			errs = append(errs, fmt.Errorf("batch %d: run at line %d was followed by batch %d in its process but has no done line: completions are not all recorded",
				r.time, r.line, next.time))
		}
	}
	return errs
}

// checkOrder checks that each process runs its re-runs first, in time
// order, then new times greater than every time before them in the file.
func checkOrder(tr *transcript, byTime map[int64][]*batchRun) []error {
	var errs []error
	maxSoFar := int64(-1)
	proc, fresh := -1, false
	prevRerun := int64(-1)
	for _, r := range tr.runs {
		if r.proc != proc {
			proc, fresh, prevRerun = r.proc, false, -1
		}
		isRerun := byTime[r.time][0] != r
		switch {
		case isRerun && fresh:
			errs = append(errs, fmt.Errorf("batch %d: re-run at line %d after a new batch of the same process", r.time, r.line))
		case isRerun && r.time <= prevRerun:
			errs = append(errs, fmt.Errorf("batch %d: re-run at line %d out of time order", r.time, r.line))
		case isRerun:
			prevRerun = r.time
		case r.time <= maxSoFar:
			errs = append(errs, fmt.Errorf("batch %d: new batch at line %d not after every earlier batch time (%d)", r.time, r.line, maxSoFar))
		default:
			fresh = true
		}
		maxSoFar = max(maxSoFar, r.time)
	}
	return errs
}

// checkRecords checks the records of the output: each in one batch time,
// every one put in a complete run, none unknown, each shard's in ID order
// over the batches' first complete runs. It returns the duplicate count.
func checkRecords(first map[int64]*batchRun, byTime map[int64][]*batchRun, put, maybe map[int64]bool) (int, []error) {
	var errs []error
	timeOf := map[int64]int64{}
	lines := 0
	for _, tm := range slices.Sorted(maps.Keys(byTime)) {
		for _, r := range byTime[tm] {
			lines += len(r.records)
			for _, x := range r.records {
				if t0, ok := timeOf[x.id]; ok && t0 != tm {
					errs = append(errs, fmt.Errorf("record %d is in batches %d and %d: a duplicate outside a re-run", x.id, min(t0, tm), max(t0, tm)))
				}
				timeOf[x.id] = tm
				if !put[x.id] && !maybe[x.id] {
					errs = append(errs, fmt.Errorf("record %d in batch %d was never put", x.id, tm))
				}
			}
		}
	}
	done := map[int64]bool{}
	lastOfShard := map[string]int64{}
	for _, tm := range slices.Sorted(maps.Keys(first)) {
		for _, x := range first[tm].records {
			if done[x.id] {
				errs = append(errs, fmt.Errorf("record %d twice in batch %d", x.id, tm))
			}
			done[x.id] = true
			if last, ok := lastOfShard[x.shard]; ok && x.id <= last {
				errs = append(errs, fmt.Errorf("shard %s: record %d in batch %d after record %d: out of order", x.shard, x.id, tm, last))
			}
			lastOfShard[x.shard] = x.id
		}
	}
	var lost []int64
	for id := range put {
		if !done[id] {
			lost = append(lost, id)
		}
	}
	if len(lost) > 0 {
		slices.Sort(lost)
		errs = append(errs, fmt.Errorf("%d records put are in no complete batch (G1), first %v", len(lost), lost[:min(len(lost), 20)]))
	}
	return lines - len(timeOf), errs
}
