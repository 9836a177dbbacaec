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
	journalName   = "replays.jsonl"
	replayLock    = ".replay.lock"
	statePutting  = "putting"
	stateDone     = "done"
	stateRefused  = "refused"       // the put was refused: nothing was put, as if never tried
	findMargin    = 5 * time.Minute // how far before a "putting" entry's Kinesis time its record is looked for
	getRecordsMax = 10000
)

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
	// (zero if none), durably, or returns an error.
	mark(ctx context.Context, l letter, prev, next journalEntry) error
}

// mark appends next to the journal, with l's fingerprint.
func (j *journal) mark(_ context.Context, l letter, _, next journalEntry) error {
	next.Letter = letterPrint(l)
	return j.add(next)
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
// (errUnreplayable) is passed over, so that one letter cut to fit its
// store does not keep every later one from being replayed, and the error
// returned names it; any other error stops the replay at once.
func replayEach(ctx context.Context, c *kinesis.Client, clk clock.Clock, s stateStore, state map[string]journalEntry, chosen []letter, streamName string, out io.Writer) error {
	var passed []error
	for _, l := range chosen {
		prev, _ := stateOf(state, l)
		err := replayOne(ctx, c, clk, s, prev, l, streamName, out)
		if errors.Is(err, errUnreplayable) {
			passed = append(passed, err)
			continue
		}
		if err != nil {
			return errors.Join(append(passed, err)...)
		}
	}
	return errors.Join(passed...)
}

// replayOne puts letter l, whose replay state is prev, into streamName
// unless it was put, or the stream holds it after a put whose end the
// state did not record; s records its state before and after the put.
func replayOne(ctx context.Context, c *kinesis.Client, clk clock.Clock, s stateStore, prev journalEntry, l letter, streamName string, out io.Writer) error {
	id := l.id
	if prev.State == stateDone {
		fmt.Fprintf(out, "%s: already replayed to %s %s %s\n", id, prev.Stream, prev.Shard, prev.Seq)
		return nil
	}
	rec, err := recordOf(l.DeadLetter, id)
	if err != nil {
		return err
	}
	if prev.State == statePutting {
		// A put that a crash (or an error) left unconfirmed: look for it.
		own := l.Range
		if own.Shard == "" && rec.ShardID != "" && rec.SequenceNumber != "" {
			own = batch.SeqRange{Stream: prev.Stream, Shard: rec.ShardID, First: rec.SequenceNumber, Last: rec.SequenceNumber}
		}
		shard, seq, found, err := find(ctx, c, prev.Stream, rec, prev.lookFrom(), own)
		if err != nil {
			return fmt.Errorf("letter %s: looking for an unconfirmed put in %s: %w", id, prev.Stream, err)
		}
		if found {
			fmt.Fprintf(out, "%s: found in %s %s %s, put by an earlier replay\n", id, prev.Stream, shard, seq)
			return s.mark(ctx, l, prev, journalEntry{ID: id, State: stateDone, At: clk.Now(), Stream: prev.Stream, Shard: shard, Seq: seq})
		}
	}
	kt, err := kinesisTime(ctx, c, streamName)
	if err != nil {
		return fmt.Errorf("letter %s: asking Kinesis's time before the put into %s: %w", id, streamName, err)
	}
	putting := journalEntry{ID: id, State: statePutting, At: clk.Now(), Stream: streamName, Kinesis: kt}
	if err := s.mark(ctx, l, prev, putting); err != nil {
		return err
	}
	in := &kinesis.PutRecordInput{StreamName: &streamName, Data: rec.Data, PartitionKey: &rec.PartitionKey}
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
		refused := journalEntry{ID: id, State: stateRefused, At: clk.Now(), Stream: streamName}
		if merr := s.mark(ctx, l, putting, refused); merr != nil {
			return errors.Join(err, merr)
		}
		return err
	}
	if err != nil {
		return fmt.Errorf("letter %s: put into %s: %w (run replay again: it looks for the record in the stream before putting it again)", id, streamName, err)
	}
	shard, seq := aws.ToString(res.ShardId), aws.ToString(res.SequenceNumber)
	fmt.Fprintf(out, "%s: replayed to %s %s %s\n", id, streamName, shard, seq)
	return s.mark(ctx, l, putting, journalEntry{ID: id, State: stateDone, At: clk.Now(), Stream: streamName, Shard: shard, Seq: seq})
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
func find(ctx context.Context, c *kinesis.Client, streamName string, rec record, since time.Time, own batch.SeqRange) (shard, seq string, found bool, err error) {
	var shards []types.Shard
	in := &kinesis.ListShardsInput{StreamName: &streamName}
	for {
		res, err := c.ListShards(ctx, in)
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
		for iter := it.ShardIterator; iter != nil; {
			res, err := c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(getRecordsMax)})
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
			if aws.ToInt64(res.MillisBehindLatest) == 0 && len(res.Records) < getRecordsMax {
				break
			}
			iter = res.NextShardIterator
		}
	}
	return "", "", false, nil
}
