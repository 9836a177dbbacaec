package dynamodb_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/internal/letters/letterstest"
	"github.com/weirstream/weir/sink/dynamodb"
	"github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/stream"
)

// TestQuarantineWithOrigins runs, against kinesalite and dynalite, a
// leased worker whose Map panics on one record before the sink, written
// with stream.Origins and stream.Quarantine: the record is quarantined
// and every other one written once, with versions of origin. A second
// application reading the stream again from its start (a replay) then
// applies nothing: each write's version is the one the first run gave it,
// the failing record's absence shifting no other record's.
func TestQuarantineWithOrigins(t *testing.T) {
	t.Parallel()
	c, table, _ := setup(t)
	env, in := oneShardStream(t)
	const bad = 17
	recs := events(60, 5, true)
	putEvents(t, env, in, recs)
	run := func(app string) (dynamodb.Stats, []stream.DeadLetter) {
		awsCfg := env.AWSConfig()
		recv, err := kinesis.New(kinesis.Config{Stream: in, App: app, InitialPosition: kinesis.TrimHorizon,
			AWS: &awsCfg, Endpoint: env.KinesisEndpoint, PollInterval: 10 * time.Millisecond,
			Leases: &leasetable.Config{Endpoint: env.DynamoDBEndpoint, WorkerID: "w", StateDir: t.TempDir()}})
		if err != nil {
			t.Fatal(err)
		}
		p, err := stream.NewPipeline(stream.Config{BatchInterval: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		s := newSink(t, t.Context(), dynamodb.Config{Client: c, Table: table})
		parsed := stream.Map(stream.From(p, recv), func(r kinesis.Record) event {
			e := parseEvent(r)
			if e.N == bad {
				panic("bad record")
			}
			return e
		})
		box := &letterstest.Box{}
		seen := 0
		stream.ForEachBatch(parsed, func(ctx context.Context, b *batch.Batch[event]) error {
			if err := s.Write(ctx, b); err != nil {
				return err
			}
			if seen += b.Len(); seen == len(recs)-1 {
				return p.Drain(ctx)
			}
			return nil
		}, stream.Origins(), stream.Quarantine(box), stream.Retry(0))
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		if err := p.Run(ctx); err != nil {
			t.Fatalf("%s: Run = %v, want nil: the bad record quarantined", app, err)
		}
		return s.Stats(), box.Letters()
	}
	st, letters := run(in)
	if st.Written != int64(len(recs)-1) {
		t.Errorf("first run: Stats %+v, want %d written", st, len(recs)-1)
	}
	if len(letters) != 1 || letters[0].Panic != "bad record" || letters[0].Range.Shard == "" {
		t.Errorf("letters %+v, want the bad record's, with its shard", letters)
	}
	want := apply(nil, append(recs[:bad:bad], recs[bad+1:]...)...)
	if diff := cmp.Diff(want, scan(t, c, table)); diff != "" {
		t.Errorf("table after the first run (-want +got):\n%s", diff)
	}
	if st, _ := run(in + "-replay"); st.Written != 0 || st.Skipped != int64(len(recs)-1) {
		t.Errorf("replay: Stats %+v, want every write skipped as applied", st)
	}
	if diff := cmp.Diff(want, scan(t, c, table)); diff != "" {
		t.Errorf("table after the replay (-want +got):\n%s", diff)
	}
}

// TestQuarantineRefusedWrites runs, against dynalite, a pipeline whose
// output writes 40 records with a Sink, with stream.Quarantine, some of
// which cannot be written: one whose function fails, one a put of an item
// over 400 KB, one with an empty key, which DynamoDB refuses. The Sink
// failed the batch as a whole, so the pass quarantined every record; with
// the empty key alone, the writes sent before DynamoDB refused it were
// applied and quarantined too, so a replay of the letters would apply them
// again. Now the bad records are quarantined, each with its own error, and
// the others are applied once.
func TestQuarantineRefusedWrites(t *testing.T) {
	const noWrite, tooLarge, emptyKey = 7, 12, 21
	for name, bad := range map[string][]int{"all": {noWrite, tooLarge, emptyKey}, "refused by DynamoDB": {emptyKey}} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			quarantineRefused(t, bad)
		})
	}
}

// quarantineRefused is TestQuarantineRefusedWrites with the bad records
// bad, of 7 (no Write), 12 (too large) and 21 (empty key).
func quarantineRefused(t *testing.T, bad []int) {
	c, table, ctx := setup(t)
	recs := events(40, 5, false)
	const noWrite, tooLarge, emptyKey = 7, 12, 21
	isBad := func(i int) bool { return slices.Contains(bad, i) }
	if isBad(emptyKey) {
		recs[emptyKey].ID = ""
	}
	if isBad(tooLarge) {
		recs[tooLarge].Put = true
	}
	s, err := dynamodb.New(ctx, dynamodb.Config{Client: c, Table: table}, func(e event) (dynamodb.Write, error) {
		switch {
		case e.N == noWrite && isBad(noWrite):
			return dynamodb.Write{}, errors.New("no write for this record")
		case e.N == tooLarge && isBad(tooLarge):
			return dynamodb.Write{Item: map[string]types.AttributeValue{"id": str(e.ID), "blob": str(strings.Repeat("x", 401<<10))}}, nil
		}
		return toWrite(e)
	})
	if err != nil {
		t.Fatal(err)
	}
	box := &letterstest.Box{}
	err = runOutputs(t, &logBuffer{}, false, recs, func(in *stream.Stream[event]) {
		stream.ForEachBatch(in, s.Write, stream.Quarantine(box), stream.Retry(0))
	})
	if err != nil {
		t.Fatalf("Run = %v, want nil: the refused records quarantined", err)
	}
	var good []event
	for i, e := range recs {
		if !isBad(i) {
			good = append(good, e)
		}
	}
	if diff := cmp.Diff(apply(nil, good...), scan(t, c, table)); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
	if st := s.Stats(); st.Written != int64(len(good)) {
		t.Errorf("Stats %+v, want %d written", st, len(good))
	}
	got := map[int]string{}
	for _, l := range box.Letters() {
		var e event
		if err := json.Unmarshal(l.Record, &e); err != nil {
			t.Fatalf("letter %+v: %v", l, err)
		}
		got[e.N] = l.Err
	}
	for n, problem := range map[int]string{noWrite: "no write for this record", tooLarge: "400 KB", emptyKey: "empty string"} {
		if isBad(n) && !strings.Contains(got[n], problem) {
			t.Errorf("letter of record %d: %q, want its own error (%s)", n, got[n], problem)
		}
	}
	if len(box.Letters()) != len(bad) {
		t.Errorf("%d letters, want %d: %v", len(box.Letters()), len(bad), got)
	}
}

// TestQuarantineRerunAfterRefusedUpdate writes, against dynalite, with
// versions by batch time, a batch of three writes of one item, the second
// an update DynamoDB refuses for the item's state (it adds to an attribute
// the item lacks): Write names it, and is called again without it, as
// stream.Quarantine does. A crash before the batch's checkpoint runs the
// whole batch again: Write must apply nothing more. The call without the
// refused write gave the third write the second's ordinal, so the rerun
// skipped the second as applied and applied the third twice; now Write
// names the third too, held back, and the rerun applies nothing.
// (Each write not named is to be applied once, whatever Write names.)
func TestQuarantineRerunAfterRefusedUpdate(t *testing.T) {
	t.Parallel()
	c, table, ctx := setup(t)
	type step struct{ update string }
	s, err := dynamodb.New(ctx, dynamodb.Config{Client: c, Table: table}, func(st step) (dynamodb.Write, error) {
		return dynamodb.Write{
			Key:    map[string]types.AttributeValue{"id": str("a")},
			Update: st.update,
			Values: map[string]types.AttributeValue{":one": num(1)},
		}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	full := batch.New(batch.Time(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()), nil,
		[]step{{"ADD hits :one"}, {"SET tally = absent + :one"}, {"ADD hits :one"}})
	err = s.Write(ctx, full)
	re, ok := errors.AsType[*stream.RecordErrors](err)
	if !ok {
		t.Fatalf("first Write = %v, want a *stream.RecordErrors", err)
	}
	if _, bad := re.Errs[1]; !bad {
		t.Fatalf("first Write names %v, want record 1", re.Errs)
	}
	kept := withoutNamed(full, re)
	if err := s.Write(ctx, kept); err != nil {
		t.Fatalf("Write without the refused records = %v, want nil", err)
	}
	// Each write not named (the first, and the third unless named too)
	// adds a hit, once.
	want := map[string]map[string]string{"a": {"hits": strconv.Itoa(kept.Len())}}
	if diff := cmp.Diff(want, scan(t, c, table)); diff != "" {
		t.Fatalf("table after the quarantine (-want +got):\n%s", diff)
	}
	// The worker crashes before the batch's checkpoint: the batch runs
	// again, the quarantine pass with it.
	err = s.Write(ctx, full)
	if re, ok := errors.AsType[*stream.RecordErrors](err); ok {
		err = s.Write(ctx, withoutNamed(full, re))
	}
	if err != nil {
		t.Fatalf("rerun: Write = %v, want nil", err)
	}
	if diff := cmp.Diff(want, scan(t, c, table)); diff != "" {
		t.Errorf("table after the rerun (-want +got):\n%s", diff)
	}
}

// withoutNamed returns b less the records re names, as stream.Quarantine
// calls a ForEachBatch function again.
func withoutNamed[T any](b *batch.Batch[T], re *stream.RecordErrors) *batch.Batch[T] {
	var kept []T
	i := 0
	for v := range b.All() {
		if _, bad := re.Errs[i]; !bad {
			kept = append(kept, v)
		}
		i++
	}
	return batch.New(b.Time(), nil, kept)
}

// TestRecallAfterRefusalFromSeveralShards writes, against dynalite, with
// versions of origin, a batch of five updates of one item whose records
// come from two shards, interleaved; DynamoDB refuses the third. Write
// names it, and is called again with the batch of the others, as
// stream.Quarantine does. The writes of the first call were applied
// under versions of two shards, so the item's version stopped none of
// them in the second call: the first two were applied again (six hits
// for four writes). Now the Sink remembers the writes it applied for the
// batch until a Write of it succeeds, and skips them in the call again.
func TestRecallAfterRefusalFromSeveralShards(t *testing.T) {
	t.Parallel()
	c, table, ctx := setup(t)
	s, err := dynamodb.New(ctx, dynamodb.Config{Client: c, Table: table}, func(update string) (dynamodb.Write, error) {
		return dynamodb.Write{
			Key:    map[string]types.AttributeValue{"id": str("a")},
			Update: update,
			Values: map[string]types.AttributeValue{":one": num(1)},
		}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	add, refused := "ADD hits :one", "SET tally = absent + :one"
	at := func(shard, seq string) batch.Origin {
		return batch.Origin{Stream: "s", Shard: shard, Seq: seq}
	}
	full := batch.New(batch.Time(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()), nil,
		[]string{add, add, refused, add, add}).
		WithOrigins([]batch.Origin{at("shardId-0", "11"), at("shardId-1", "21"), at("shardId-0", "12"), at("shardId-1", "22"), at("shardId-0", "13")})
	err = s.Write(ctx, full)
	re, ok := errors.AsType[*stream.RecordErrors](err)
	if !ok || len(re.Errs) != 1 || re.Errs[2] == nil {
		t.Fatalf("first Write = %v, want a *stream.RecordErrors naming record 2", err)
	}
	others := full.Keep(func(i int, _ string) bool { return re.Errs[i] == nil })
	if err := s.Write(ctx, others); err != nil {
		t.Fatalf("Write of the others = %v, want nil", err)
	}
	want := map[string]map[string]string{"a": {"hits": "4"}}
	if diff := cmp.Diff(want, scan(t, c, table)); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
	if st := s.Stats(); st.Written != 4 || st.Skipped != 2 {
		t.Errorf("Stats %+v, want 4 written and 2 skipped", st)
	}
}
