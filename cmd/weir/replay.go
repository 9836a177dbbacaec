package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/awsconf"
	"github.com/weirstream/weir/internal/awserr"
	"github.com/weirstream/weir/internal/dirlock"
	"github.com/weirstream/weir/internal/durable"
	"github.com/weirstream/weir/internal/letters"
	"github.com/weirstream/weir/sink/deadletter"
	"github.com/weirstream/weir/stream"
)

// The replay journal: a file of the dead-letter directory, one JSON entry a
// line, appended and fsynced. For each letter replay writes "putting"
// before its PutRecord and "done" (with the shard and sequence number)
// after; the latest entry of a letter is its state.
const (
	journalName  = "replays.jsonl"
	replayLock   = ".replay.lock"
	statePutting = "putting"
	stateDone    = "done"
	stateRefused = "refused"       // the put was refused: nothing was put, as if never tried
	findMargin   = 5 * time.Minute // how far before a "putting" entry's Kinesis time its record is looked for
	// readPause is the pause between two GetRecords of one shard in the
	// search for an unconfirmed put: Kinesis serves a shard five
	// GetRecords a second, and throttles the calls past that.
	readPause = 200 * time.Millisecond
	// claimFor is how long a run's claim on a letter of a table (a
	// "putting" state naming the run) lasts past its latest write: the
	// run renews it while it holds it, and another run takes it over
	// only once it has run out.
	claimFor = 5 * time.Minute
	// putWindow is the time a run's claim must have left when it sends
	// the letter's put: more than the put's one attempt takes
	// (attemptTimeout), so that the put has ended, answered or not,
	// before another run can take the letter over and look for it.
	putWindow = time.Minute
)

// getRecordsLimit is the most records the search for an unconfirmed put
// asks of each GetRecords, Kinesis's most; tests lower it.
var getRecordsLimit int32 = 10000

type journalEntry struct {
	ID     string    `json:"id"`
	State  string    `json:"state"`
	At     time.Time `json:"at"` // on this machine's clock
	Stream string    `json:"stream"`
	Shard  string    `json:"shard,omitempty"`
	Seq    string    `json:"seq,omitempty"`
	// Kinesis is, for "putting", a time on Kinesis's clock before the put
	// (the Date of its answer to a call made just before); zero if no
	// answer had one, and in entries written before weir recorded it.
	Kinesis time.Time `json:"kinesisAt,omitzero"`
	// Letter is the fingerprint of the letter the entry is of
	// (letterPrint): a letter written later under the same ID (its file
	// moved out, as ErrTimeReused says to do, or replaced by a batch a
	// restart recomputed) is another one, with no state yet. Empty in
	// entries of a table's letters, and in those written before weir
	// recorded it: they are taken as the letter's.
	Letter string `json:"letter,omitempty"`
	// Owner is, for "putting" in a table, the run that claims the letter
	// (a random name each run draws), and Until the end of its claim, on
	// DynamoDB's clock: until then no other run puts the letter or takes
	// it over. An entry without Owner, written before weir named owners,
	// and one whose Until is zero (its run released it, having put
	// nothing, or ended with the put unconfirmed) claim nothing: the
	// next run takes the letter over at once. A directory's entries have
	// neither: one replay at a time holds the directory's lock.
	Owner string    `json:"owner,omitempty"`
	Until time.Time `json:"until,omitzero"`
}

// letterPrint returns the fingerprint a journal entry records of l.
func letterPrint(l letter) string { return letters.Fingerprint(true, l.DeadLetter) }

// stateOf returns the entry of state that is l's, or none.
func stateOf(state map[string]journalEntry, l letter) (journalEntry, bool) {
	e, ok := state[l.id]
	if !ok || e.Letter != "" && e.Letter != letterPrint(l) {
		return journalEntry{}, false
	}
	return e, true
}

// lookFrom returns the time from which the record of e, a "putting"
// entry, is looked for in the stream: findMargin before e.Kinesis, or the
// zero time (the start of the stream's retention) if e has none. Never
// e.At: Kinesis stamps records on its own clock, and a machine's clock
// running ahead of it by more than findMargin would start after the record
// and put it again.
func (e journalEntry) lookFrom() time.Time {
	if e.Kinesis.IsZero() {
		return time.Time{}
	}
	return e.Kinesis.Add(-findMargin)
}

// parseJournal returns the latest entry of each letter in data, and the
// length of data that holds whole lines: a last line without its newline
// is a write a crash cut, never acted on (its fsync had not returned), and
// is ignored.
func parseJournal(data []byte) (map[string]journalEntry, int, error) {
	state := make(map[string]journalEntry)
	whole := bytes.LastIndexByte(data, '\n') + 1
	for n, line := range bytes.Split(data[:whole], []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var e journalEntry
		if err := json.Unmarshal(line, &e); err != nil {
			return nil, 0, fmt.Errorf("%s line %d: %w", journalName, n+1, err)
		}
		state[e.ID] = e
	}
	return state, whole, nil
}

// readJournal returns the latest entry of each letter of the journal in
// dir; none if there is no journal.
func readJournal(dir string) (map[string]journalEntry, error) {
	d, err := durable.OpenDir(dir, 0)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	data, err := d.ReadFile(journalName)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]journalEntry{}, nil
	}
	if err != nil {
		return nil, err
	}
	state, _, err := parseJournal(data)
	return state, err
}

// journal is the replay journal, open for appending.
type journal struct{ f *os.File }

// openJournal reads the journal of d, cuts a torn last line, and opens it
// for appending.
func openJournal(d *durable.Dir) (map[string]journalEntry, *journal, error) {
	f, err := d.Open(journalName, os.O_RDWR)
	if errors.Is(err, fs.ErrNotExist) {
		if f, err = d.Create(journalName, os.O_RDWR); err == nil {
			err = d.Sync() // the journal's name survives a crash
		}
	}
	if err != nil {
		return nil, nil, err
	}
	data, err := io.ReadAll(f)
	var state map[string]journalEntry
	whole := 0
	if err == nil {
		state, whole, err = parseJournal(data)
	}
	if err == nil && whole < len(data) {
		err = f.Truncate(int64(whole))
	}
	if err == nil {
		_, err = f.Seek(int64(whole), io.SeekStart)
	}
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %w", d.Join(journalName), err)
	}
	return state, &journal{f: f}, nil
}

// add appends e and fsyncs it.
func (j *journal) add(e journalEntry) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if _, err := j.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("replay journal: %w", err)
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("replay journal: %w", err)
	}
	return nil
}

// record is what replay puts.
type record struct {
	Data                          []byte
	PartitionKey, ExplicitHashKey string
	// SequenceNumber and ShardID are where the record was read, if its
	// letter says (a kinesis.Record's): not put, but not taken for the
	// replay's put either (see find).
	SequenceNumber, ShardID string
}

// letter is a letter of a store and its name there: letters.ID for a
// directory's, the item's key for a table's (lettertable.ID).
type letter struct {
	id  string
	key map[string]ddbtypes.AttributeValue // a table's letter's item key
	stream.DeadLetter
}

// dirLetters returns the letters of dir, named.
func dirLetters(dir string) ([]letter, error) {
	ls, err := deadletter.Read(dir)
	if err != nil {
		return nil, err
	}
	named := make([]letter, len(ls))
	for i, l := range ls {
		named[i] = letter{id: letters.ID(l), DeadLetter: l}
	}
	return named, nil
}

// partitionKey returns the partition key of the replayed record of a
// []byte or string letter named id: id, or, if id is over the 256
// characters a partition key may have (a table's letter of a long stream
// name), its SHA-256 in hex.
func partitionKey(id string) string {
	if utf8.RuneCountInString(id) <= 256 {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}

// errUnreplayable is wrapped by the error of a letter whose record replay
// cannot put: replayEach goes on past it.
var errUnreplayable = errors.New("it cannot be replayed (the other letters chosen are replayed all the same)")

// recordOf returns the record of letter l, named id, to put, or an error
// wrapping errUnreplayable.
func recordOf(l stream.DeadLetter, id string) (record, error) {
	switch l.Encoding {
	case "json":
		var r record
		if err := json.Unmarshal(l.Record, &r); err != nil || r.PartitionKey == "" {
			return record{}, fmt.Errorf("letter %s: its record is not a kinesis.Record (JSON with Data and PartitionKey), and replay puts records a pipeline read from Kinesis: %w", id, errUnreplayable)
		}
		return r, nil
	case "raw":
		return record{Data: l.Record, PartitionKey: partitionKey(id)}, nil
	}
	return record{}, fmt.Errorf("letter %s: its record is encoded as %q, which cannot be decoded: %w", id, l.Encoding, errUnreplayable)
}

// stateStore keeps the replay state of letters: the journal of a
// directory, or the items of a table.
type stateStore interface {
	// mark records next as the state of letter l, whose state was prev
	// (zero if none), durably, or returns an error: one wrapping
	// errStateChanged if l's state is no longer prev.
	mark(ctx context.Context, l letter, prev, next journalEntry) error
	// claim returns e, a "putting" entry of this run, with the owner and
	// the deadline of the store's claims: none for a directory, which
	// one replay at a time holds.
	claim(e journalEntry) journalEntry
	// held reports whether e, a "putting" state read from the store, is
	// a claim another run may still hold, and act on: false for one
	// that ran out or was released, and for a directory's.
	held(e journalEntry) bool
	// lasts reports whether e, a claim of this run, lasts at least d
	// more.
	lasts(e journalEntry, d time.Duration) bool
	// reset says how an operator has replay put letter l, whose state
	// is e, again as if it had never been tried.
	reset(l letter, e journalEntry) string
}

// errStateChanged is wrapped by the error of a mark refused because the
// letter's state is no longer the one the run read: another run changed
// it.
var errStateChanged = errors.New("its replay state changed")

// mark appends next to the journal, with l's fingerprint.
func (j *journal) mark(_ context.Context, l letter, _, next journalEntry) error {
	next.Letter = letterPrint(l)
	return j.add(next)
}

// claim returns e as it is: the directory's lock keeps other runs out.
func (j *journal) claim(e journalEntry) journalEntry { return e }

// held reports false: a "putting" entry of the journal is a run's that
// ended, since this run holds the directory's lock.
func (j *journal) held(journalEntry) bool { return false }

// lasts reports true: the directory's lock lasts as long as the run.
func (j *journal) lasts(journalEntry, time.Duration) bool { return true }

// reset names the line to append to the journal, a "refused" entry of l.
func (j *journal) reset(l letter, e journalEntry) string {
	line, _ := json.Marshal(journalEntry{ID: l.id, State: stateRefused, At: time.Now().UTC(), Stream: e.Stream, Letter: letterPrint(l)})
	return fmt.Sprintf("append this line to %s while no replay runs: %s", j.f.Name(), line)
}

// choose returns the letters of all named ids, all if none, or an error
// naming those it does not hold; where names the store for the error
// ("-dir D", "-table T").
func choose(all []letter, ids []string, where string) ([]letter, error) {
	if len(ids) == 0 {
		return all, nil
	}
	byID := make(map[string]letter, len(all))
	for _, l := range all {
		byID[l.id] = l
	}
	var chosen []letter
	var unknown []string
	for _, id := range ids {
		l, ok := byID[id]
		if !ok {
			unknown = append(unknown, id)
		}
		chosen = append(chosen, l)
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("no letter %s in %s: see weir deadletters list %s", strings.Join(unknown, ", "), where, where)
	}
	return chosen, nil
}

// noLetters returns err, the error of choosing the letters to replay from
// the store named where; if nil, there were none, which it says on out: a
// replay of an empty store, or of a mistyped directory, is not silent.
func noLetters(err error, where string, out io.Writer) error {
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "no letters in %s: nothing to replay\n", where)
	return nil
}

// replay puts the chosen letters of dir (ids, or all if none) into
// streamName, each at most once over every run, with the client kc makes
// once there are letters to put, and reports each to out.
func replay(ctx context.Context, kc func() (*kinesis.Client, error), clk clock.Clock, dir, streamName string, ids []string, out io.Writer) error {
	all, err := dirLetters(dir)
	if err != nil {
		return err
	}
	chosen, err := choose(all, ids, "-dir "+dir)
	if err != nil || len(chosen) == 0 {
		return noLetters(err, "-dir "+dir, out)
	}
	c, err := kc()
	if err != nil {
		return err
	}
	d, err := durable.OpenDir(dir, 0)
	if err != nil {
		return err
	}
	defer d.Close()
	lock, err := dirlock.Acquire(d, replayLock)
	if errors.Is(err, dirlock.ErrLocked) {
		return fmt.Errorf("another replay runs on %s: wait for it to end", dir)
	}
	if err != nil {
		return err
	}
	defer lock.Release()
	state, j, err := openJournal(d)
	if err != nil {
		return err
	}
	defer j.f.Close()
	return replayEach(ctx, c, clk, j, state, chosen, streamName, out)
}

// replayEach replays the chosen letters, whose replay states are state,
// in order (see replayOne). A letter that cannot be replayed
// (errUnreplayable), or that another run is replaying (errClaimed), is
// passed over, so that one letter does not keep every later one from
// being replayed, and the error returned names it; any other error stops
// the replay at once.
func replayEach(ctx context.Context, c *kinesis.Client, clk clock.Clock, s stateStore, state map[string]journalEntry, chosen []letter, streamName string, out io.Writer) error {
	var passed []error
	for _, l := range chosen {
		prev, _ := stateOf(state, l)
		err := replayOne(ctx, c, clk, s, prev, l, streamName, out)
		if errors.Is(err, errUnreplayable) || errors.Is(err, errClaimed) {
			passed = append(passed, err)
			continue
		}
		if err != nil {
			return errors.Join(append(passed, err)...)
		}
	}
	return errors.Join(passed...)
}

// errClaimed is wrapped by the error of a letter another run is
// replaying: replayEach goes on past it.
var errClaimed = errors.New("run replay again once the other run ended, to confirm it was replayed (the other letters chosen are replayed all the same)")

// leftToOther reports, on out and in the error it returns, that letter id
// is left to another run, which why describes.
func leftToOther(out io.Writer, id, why string) error {
	fmt.Fprintf(out, "%s: being replayed by another run (%s): left to it\n", id, why)
	return fmt.Errorf("letter %s: being replayed by another run (%s): %w", id, why, errClaimed)
}

// errStreamGone is wrapped by the error of a search for an unconfirmed
// put into a stream that no longer exists.
var errStreamGone = errors.New("the stream does not exist")

// replayOne puts letter l, whose replay state is prev, into streamName
// unless it was put, or the stream holds it after a put whose end the
// state did not record, or another run holds it (its claim has not run
// out); s records its state before and after the put.
func replayOne(ctx context.Context, c *kinesis.Client, clk clock.Clock, s stateStore, prev journalEntry, l letter, streamName string, out io.Writer) (err error) {
	id := l.id
	if prev.State == stateDone {
		fmt.Fprintf(out, "%s: already replayed to %s %s %s\n", id, prev.Stream, prev.Shard, prev.Seq)
		return nil
	}
	rec, err := recordOf(l.DeadLetter, id)
	if err != nil {
		return err
	}
	if prev.State == statePutting && s.held(prev) {
		return leftToOther(out, id, fmt.Sprintf("run %s, whose claim lasts until %s on DynamoDB's clock unless it renews it",
			prev.Owner, prev.Until.UTC().Format(time.RFC3339)))
	}
	h := &holder{ctx: ctx, clk: clk, s: s, l: l, out: out, state: prev}
	defer func() { err = h.end(err) }()
	if prev.State == statePutting {
		// A put that a crash (or an error) left unconfirmed, or whose
		// run's claim ran out: claimed first, so that no other run
		// takes the letter meanwhile, then looked for.
		if err := h.take(journalEntry{Stream: prev.Stream, Kinesis: prev.Kinesis}); err != nil {
			return err
		}
		own := l.Range
		if own.Shard == "" && rec.ShardID != "" && rec.SequenceNumber != "" {
			own = batch.SeqRange{Stream: prev.Stream, Shard: rec.ShardID, First: rec.SequenceNumber, Last: rec.SequenceNumber}
		}
		shard, seq, found, err := find(ctx, c, prev.Stream, rec, prev.lookFrom(), own, h.pause)
		if errors.Is(err, errStreamGone) {
			return fmt.Errorf("letter %s: an earlier replay's put of it into %s was left unconfirmed (a crash, or no answer), and %s no longer exists, "+
				"so whether the record reached it (and its readers) cannot be found out: if it must be put again, "+
				"%s, then run replay again: %w", id, prev.Stream, prev.Stream, s.reset(l, prev), err)
		}
		if err != nil {
			return fmt.Errorf("letter %s: looking for an unconfirmed put in %s: %w", id, prev.Stream, err)
		}
		if found {
			fmt.Fprintf(out, "%s: found in %s %s %s, put by an earlier replay\n", id, prev.Stream, shard, seq)
			return h.finish(journalEntry{State: stateDone, Stream: prev.Stream, Shard: shard, Seq: seq})
		}
	}
	kt, err := kinesisTime(ctx, c, streamName)
	if err != nil {
		return fmt.Errorf("letter %s: asking Kinesis's time before the put into %s: %w", id, streamName, err)
	}
	if err := h.take(journalEntry{Stream: streamName, Kinesis: kt}); err != nil {
		return err
	}
	if err := h.keep(putWindow); err != nil {
		return err
	}
	data := rec.Data
	if data == nil {
		// Kinesis takes a record of no data, but the AWS SDK refuses a nil
		// Data as a missing field, before sending the put.
		data = []byte{}
	}
	in := &kinesis.PutRecordInput{StreamName: &streamName, Data: data, PartitionKey: &rec.PartitionKey}
	if rec.ExplicitHashKey != "" {
		in.ExplicitHashKey = &rec.ExplicitHashKey
	}
	// No retry by the SDK: a put retried after a lost answer would put
	// the record twice. An error leaves the letter "putting", which the
	// next replay looks for in the stream first.
	res, err := c.PutRecord(ctx, in, func(o *kinesis.Options) { o.RetryMaxAttempts = 1 })
	if err != nil && (awserr.Refused(err) || throttled(err)) {
		// Refused (no such stream, access denied) or throttled: nothing
		// was put, so the letter is not left "putting", to be looked for
		// in a stream that may not exist, or that is busy.
		err = fmt.Errorf("letter %s: put into %s: %w", id, streamName, err)
		if throttled(err) {
			err = fmt.Errorf("%w (nothing was put: run replay again later)", err)
		}
		if merr := h.finish(journalEntry{State: stateRefused, Stream: streamName}); merr != nil {
			return errors.Join(err, merr)
		}
		return err
	}
	if err != nil {
		return fmt.Errorf("letter %s: put into %s: %w (run replay again: it looks for the record in the stream before putting it again)", id, streamName, err)
	}
	shard, seq := aws.ToString(res.ShardId), aws.ToString(res.SequenceNumber)
	fmt.Fprintf(out, "%s: replayed to %s %s %s\n", id, streamName, shard, seq)
	return h.finish(journalEntry{State: stateDone, Stream: streamName, Shard: shard, Seq: seq})
}

// holder keeps a letter's replay state through one run's replay of it:
// the state it last read or wrote, and whether that is the run's claim.
type holder struct {
	ctx   context.Context
	clk   clock.Clock
	s     stateStore
	l     letter
	out   io.Writer
	state journalEntry // the letter's state as the run last read or wrote it
	held  bool         // state is the run's claim
	lost  bool         // another run took the claim over
}

// take marks the letter putting (into next.Stream, with next.Kinesis),
// claimed by the run. Refused because another run changed the state
// since the run read it, the letter is left to that run (errClaimed); a
// claim of the run's own that another run took over is an error.
func (h *holder) take(next journalEntry) error {
	next.ID, next.State, next.At = h.l.id, statePutting, h.clk.Now()
	next = h.s.claim(next)
	if err := h.s.mark(h.ctx, h.l, h.state, next); err != nil {
		return h.refused(err, "claiming it")
	}
	h.state, h.held = next, true
	return nil
}

// refused returns the error of a mark refused with err while doing what.
func (h *holder) refused(err error, what string) error {
	switch {
	case !errors.Is(err, errStateChanged):
		return err
	case h.held:
		h.lost = true
		return fmt.Errorf("letter %s: %s: another run took over this run's claim, which had run out (the run was held up for longer than %v), or the letter was deleted: "+
			"that run looks for any put of this run's in the stream before it puts the letter; run replay again once it ended, to confirm: %w", h.l.id, what, claimFor, err)
	}
	return leftToOther(h.out, h.l.id, "its replay state changed since this run read it, unless the letter was deleted")
}

// keep renews the run's claim once half of it has passed, and returns an
// error, having put nothing, if it then lasts less than d more.
func (h *holder) keep(d time.Duration) error {
	if !h.held || h.s.lasts(h.state, claimFor/2) {
		return nil
	}
	if err := h.take(journalEntry{Stream: h.state.Stream, Kinesis: h.state.Kinesis}); err != nil {
		return err
	}
	if !h.s.lasts(h.state, d) {
		return fmt.Errorf("letter %s: its claim, renewed, lasts less than %v (the table answers slowly): not put; run replay again", h.l.id, d)
	}
	return nil
}

// pause waits between two reads of the search for an unconfirmed put,
// and keeps the run's claim meanwhile.
func (h *holder) pause(ctx context.Context) error {
	if err := clock.Sleep(ctx, h.clk, readPause); err != nil {
		return err
	}
	return h.keep(0)
}

// finish marks the letter next.State ("done" or "refused"), which ends
// the run's claim.
func (h *holder) finish(next journalEntry) error {
	next.ID, next.At = h.l.id, h.clk.Now()
	if err := h.s.mark(h.ctx, h.l, h.state, next); err != nil {
		return h.refused(err, "marking it "+next.State)
	}
	h.state, h.held = next, false
	return nil
}

// end returns err, the outcome of the replay of the letter; if it is an
// error and the run still holds its claim, it releases it first, so that
// the next run takes the letter over at once instead of waiting for the
// claim to run out: the run is putting nothing (a put it sent has
// ended, answered or not), and the next run looks for it in the stream.
func (h *holder) end(err error) error {
	if err == nil || !h.held || h.lost || h.state.Owner == "" {
		return err
	}
	released := h.state
	released.At, released.Until = h.clk.Now(), time.Time{}
	// Released even when the run was interrupted: the call is bounded by
	// attemptTimeout.
	if merr := h.s.mark(context.WithoutCancel(h.ctx), h.l, h.state, released); merr != nil {
		return errors.Join(err, fmt.Errorf("letter %s: releasing this run's claim (it runs out by itself at %s): %w", h.l.id, h.state.Until.UTC().Format(time.RFC3339), merr))
	}
	return err
}

// kinesisTime returns a time on Kinesis's clock, no later than now: the
// Date of its answer to a ListShards of streamName (whole seconds, rounded
// down), as a shard reader of package source/kinesis takes it; the zero
// time if the answer has none. A record put after it arrives no earlier on
// Kinesis's clock, whatever this machine's clock says.
func kinesisTime(ctx context.Context, c *kinesis.Client, streamName string) (time.Time, error) {
	res, err := c.ListShards(ctx, &kinesis.ListShardsInput{StreamName: &streamName, MaxResults: aws.Int32(1)})
	if err != nil {
		return time.Time{}, err
	}
	date, _ := awsmiddleware.GetServerTime(res.ResultMetadata)
	return date, nil
}

// inRange reports whether the record seq of shard of streamName is in rng
// (its stream named by name or by ARN).
func inRange(rng batch.SeqRange, streamName, shard, seq string) bool {
	if rng.Shard != shard || rng.First == "" || rng.Last == "" {
		return false
	}
	name := func(s string) string {
		if n, ok := awsconf.StreamNameOfARN(s); ok {
			return n
		}
		return s
	}
	if name(rng.Stream) != name(streamName) {
		return false
	}
	return batch.CompareSeq(seq, rng.First) >= 0 && batch.CompareSeq(seq, rng.Last) <= 0
}

// throttled reports whether err is Kinesis throttling a put
// (ProvisionedThroughputExceededException, or KMSThrottlingException for a
// stream encrypted with a KMS key): Kinesis answered, and put nothing.
func throttled(err error) bool {
	var pte *types.ProvisionedThroughputExceededException
	var kte *types.KMSThrottlingException
	return errors.As(err, &pte) || errors.As(err, &kte)
}

// find looks in every shard of streamName, from since (on Kinesis's clock;
// the zero time: from the start of its retention) to the end, for a record
// with rec's partition key and data, other than those of own: the range the
// letter's record was read from. Replayed into the stream it was read
// from, the letter's own record is there, with the same key and data, and
// is not the replay's put, which comes after it in its shard.
//
// Before each GetRecords of a shard but the first, it calls wait, which
// pauses (Kinesis serves a shard five GetRecords a second) and may fail.
// A stream that does not exist is an error wrapping errStreamGone.
func find(ctx context.Context, c *kinesis.Client, streamName string, rec record, since time.Time, own batch.SeqRange, wait func(context.Context) error) (shard, seq string, found bool, err error) {
	var shards []types.Shard
	in := &kinesis.ListShardsInput{StreamName: &streamName}
	for {
		res, err := c.ListShards(ctx, in)
		var notFound *types.ResourceNotFoundException
		if errors.As(err, &notFound) && in.NextToken == nil {
			return "", "", false, fmt.Errorf("%w: %w", errStreamGone, err)
		}
		if err != nil {
			return "", "", false, err
		}
		shards = append(shards, res.Shards...)
		if res.NextToken == nil {
			break
		}
		in = &kinesis.ListShardsInput{NextToken: res.NextToken}
	}
	for _, sh := range shards {
		in := &kinesis.GetShardIteratorInput{StreamName: &streamName, ShardId: sh.ShardId,
			ShardIteratorType: types.ShardIteratorTypeAtTimestamp, Timestamp: &since}
		if since.IsZero() {
			in.ShardIteratorType, in.Timestamp = types.ShardIteratorTypeTrimHorizon, nil
		}
		it, err := c.GetShardIterator(ctx, in)
		if err != nil {
			return "", "", false, err
		}
		for iter, first := it.ShardIterator, true; iter != nil; first = false {
			if !first {
				if err := wait(ctx); err != nil {
					return "", "", false, err
				}
			}
			res, err := c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(getRecordsLimit)})
			if err != nil {
				return "", "", false, err
			}
			for _, r := range res.Records {
				if aws.ToString(r.PartitionKey) != rec.PartitionKey || !bytes.Equal(r.Data, rec.Data) ||
					inRange(own, streamName, aws.ToString(sh.ShardId), aws.ToString(r.SequenceNumber)) {
					continue
				}
				return aws.ToString(sh.ShardId), aws.ToString(r.SequenceNumber), true, nil
			}
			// At the tip: nothing behind this page (an empty page alone
			// may be a gap in the shard), which is not a full one
			// (kinesalite says 0 behind even then). The record was put
			// before this replay began, so it has been read by now: the
			// records a busy shard gets meanwhile are not followed, which
			// would never end.
			if aws.ToInt64(res.MillisBehindLatest) == 0 && len(res.Records) < int(getRecordsLimit) {
				break
			}
			iter = res.NextShardIterator
		}
	}
	return "", "", false, nil
}
