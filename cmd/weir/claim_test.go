package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/localaws/faults"
)

// onPut is an AWS SDK HTTP client that runs hook, once, when the first
// PutRecord is about to be sent, before sending it: the moment a replay
// has marked its letter putting and not yet put it.
type onPut struct {
	next *faults.Transport
	once sync.Once
	hook func(ctx context.Context)
}

// Do runs the hook before the first PutRecord, then sends req.
func (p *onPut) Do(req *http.Request) (*http.Response, error) {
	if strings.HasSuffix(req.Header.Get("X-Amz-Target"), ".PutRecord") {
		p.once.Do(func() { p.hook(req.Context()) })
	}
	return p.next.Do(req)
}

// fillShards puts a record into each shard of f's stream: kinesalite
// never answers an AT_TIMESTAMP GetShardIterator on an empty shard
// (mhart/kinesalite issue 84), which a search for an unconfirmed put sends.
func fillShards(t *testing.T, f *fixture) {
	t.Helper()
	for _, hashKey := range []string{"0", "340282366920938463463374607431768211455"} {
		if _, err := f.c.PutRecord(t.Context(), &kinesis.PutRecordInput{StreamName: &f.stream, Data: []byte("x"),
			PartitionKey: aws.String("filler"), ExplicitHashKey: aws.String(hashKey)}); err != nil {
			t.Fatal(err)
		}
	}
}

// count returns how many of the stream's records f.records lists as r.
func count(t *testing.T, f *fixture, r string) int {
	t.Helper()
	n := 0
	for _, got := range f.records(t) {
		if got == r {
			n++
		}
	}
	return n
}

// TestReplayTableConcurrentRuns runs two replays of one letter of a table
// at once, as two operators may: the second starts while the first has
// marked the letter putting and not yet put it. A putting state had no
// owner, so the second took it for a crashed run's, looked for the record
// in the stream (not there yet), and put it; then the first put it too:
// twice. The first run's claim now names it and lasts a while, on
// DynamoDB's clock: the second run leaves the letter to it and says so,
// even when its machine's clock is an hour ahead, and the record is put
// once.
func TestReplayTableConcurrentRuns(t *testing.T) {
	for _, tc := range []struct {
		name   string
		second clock.Clock
	}{
		{"same clocks", clock.Real{}},
		{"second clock an hour ahead", aheadClock{d: time.Hour}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, s := newTableFixture(t)
			fillShards(t, f)
			id := f.ids[1] // k2=b
			tr, err := faults.New(faults.Config{})
			if err != nil {
				t.Fatal(err)
			}
			var outB bytes.Buffer
			var errB error
			hook := &onPut{next: tr, hook: func(ctx context.Context) {
				second := tableStore{c: s.c, table: s.table}
				errB = replayTable(ctx, func() (*kinesis.Client, error) { return f.c, nil }, tc.second, second, f.stream, []string{id}, &outB)
			}}
			c := servers.Env(t).Kinesis(func(o *kinesis.Options) { o.HTTPClient = hook })
			var outA bytes.Buffer
			errA := replayTable(t.Context(), func() (*kinesis.Client, error) { return c, nil }, clock.Real{}, s, f.stream, []string{id}, &outA)
			if n := count(t, f, "k2=b"); n != 1 {
				t.Errorf("the letter's record is in the stream %d times, want once\nfirst run (%v):\n%s\nsecond run (%v):\n%s", n, errA, outA.String(), errB, outB.String())
			}
			if errA != nil || !strings.Contains(outA.String(), id+": replayed to "+f.stream) {
				t.Errorf("the first run = %v:\n%s\nwant the letter replayed", errA, outA.String())
			}
			if errB == nil || !strings.Contains(errB.Error(), "being replayed by another run") || !strings.Contains(outB.String(), id+": being replayed by another run") {
				t.Errorf("the second run = %v:\n%s\nwant the letter left to the first run, and said so", errB, outB.String())
			}
			if out := f.replay(t); !strings.Contains(out, id+": already replayed to "+f.stream) {
				t.Errorf("a third run says:\n%s\nwant the letter already replayed", out)
			}
		})
	}
}

// TestReplayTableTakesOverRunOutClaims replays letters claimed by runs
// that ended without confirming their puts: a claim that ran out, whose
// put did not reach the stream (put now, once) or did (found, not put
// again), and a claim its run released (put now); and one claim that has
// not run out, which is left to its run, said so, and named in the error.
func TestReplayTableTakesOverRunOutClaims(t *testing.T) {
	f, s := newTableFixture(t)
	fillShards(t, f)
	ctx := t.Context()
	now := time.Now()
	claims := []journalEntry{
		{State: statePutting, Stream: f.stream, At: now, Owner: "crashed", Until: now.Add(-time.Minute)}, // k1=a, not put
		{State: statePutting, Stream: f.stream, At: now, Owner: "crashed", Until: now.Add(-time.Minute)}, // k2=b, put
		{State: statePutting, Stream: f.stream, At: now, Owner: "running", Until: now.Add(time.Hour)},    // c, left
		{State: statePutting, Stream: f.stream, At: now, Owner: "released"},                              // k4=d, not put
	}
	for i, b := range [][]int{{0, 0}, {0, 1}, {1, 0}, {2, 0}} {
		if err := s.mark(ctx, tableLetter(f.batches[b[0]][b[1]]), journalEntry{}, claims[i]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.c.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: &f.stream, Data: []byte("b"), PartitionKey: aws.String("k2")}); err != nil {
		t.Fatal(err)
	}
	out, err := f.cmd(t, append([]string{"deadletters", "replay", "-stream", f.stream, "-all"}, f.store...)...)
	if err == nil || !strings.Contains(err.Error(), f.ids[2]+": being replayed by another run (run running") || exitCode(err) != 1 {
		t.Errorf("replay = %v (exit status %d), want an error naming %s, claimed by run running", err, exitCode(err), f.ids[2])
	}
	for _, want := range []string{f.ids[0] + ": replayed to ", f.ids[1] + ": found in ", f.ids[2] + ": being replayed by another run", f.ids[3] + ": replayed to "} {
		if !strings.Contains(out, want) {
			t.Errorf("replay says:\n%s\nwant %q", out, want)
		}
	}
	want := []string{"filler=x", "filler=x", "k1=a", "k2=b", "k4=d"}
	if diff := cmp.Diff(want, f.records(t)); diff != "" {
		t.Errorf("stream after the replay (-want +got):\n%s", diff)
	}
}

// TestReplayTableRenewsClaimDuringSearch takes over a crashed run's letter
// and looks for its put in a shard of several pages, on a manual clock:
// between two reads it pauses, and renews its claim once half of it has
// passed. When another run has taken the claim over meanwhile (this run
// was held up past its claim's end), the run stops at its next renewal
// and puts nothing: the other run replays the letter.
func TestReplayTableRenewsClaimDuringSearch(t *testing.T) {
	f, s := newTableFixture(t)
	defer func(n int32) { getRecordsLimit = n }(getRecordsLimit)
	getRecordsLimit = 1
	ctx := t.Context()
	for range 4 {
		if _, err := f.c.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: &f.stream, Data: []byte("x"),
			PartitionKey: aws.String("filler"), ExplicitHashKey: aws.String("0")}); err != nil {
			t.Fatal(err)
		}
	}
	l := tableLetter(f.batches[0][0]) // k1=a, crashed before its put
	if err := s.mark(ctx, l, journalEntry{}, journalEntry{State: statePutting, Stream: f.stream, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	claim := func() journalEntry {
		t.Helper()
		_, state, err := s.read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return state[l.id]
	}
	m := clock.NewManual(time.Now())
	running, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	var out bytes.Buffer
	go func() {
		defer stop() // the run ended: WaitForWaiters returns
		done <- replayTable(running, func() (*kinesis.Client, error) { return f.c, nil }, m, s, f.stream, []string{l.id}, &out)
	}()
	if err := m.WaitForWaiters(running, 1); err != nil {
		t.Fatalf("the search never paused between two reads: %v\nreplay = %v\n%s", err, <-done, out.String())
	}
	first := claim()
	m.Advance(claimFor/2 + time.Second)
	if err := m.WaitForWaiters(running, 1); err != nil {
		t.Fatalf("the search never paused again: %v\nreplay = %v\n%s", err, <-done, out.String())
	}
	renewed := claim()
	if renewed.Owner != first.Owner || renewed.Owner == "" || !renewed.Until.After(first.Until.Add(claimFor/2)) {
		t.Errorf("claim %+v, then %+v, %v later: want the same owner's claim renewed", first, renewed, claimFor/2+time.Second)
	}
	// Another run takes the claim over, and this run goes on.
	other := journalEntry{State: statePutting, Stream: f.stream, At: time.Now(), Owner: "other", Until: time.Now().Add(time.Hour)}
	if err := s.mark(ctx, l, renewed, other); err != nil {
		t.Fatal(err)
	}
	// Held up past its claim's end: dynalite's clock, whose Date the run
	// took at its renewal, does not follow the manual clock, so the run
	// counts its claim from there.
	m.Advance(claimFor + claimFor/2)
	if m.WaitForWaiters(running, 1) == nil {
		stop()
		t.Fatalf("the run searched on, its claim taken over; replay = %v\n%s", <-done, out.String())
	}
	err := <-done
	if err == nil || !strings.Contains(err.Error(), "another run took over this run's claim") {
		t.Errorf("replay = %v\n%s\nwant it stopped, its claim taken over", err, out.String())
	}
	if n := count(t, f, "k1=a"); n != 0 {
		t.Errorf("the letter's record is in the stream %d times, want none: the other run replays it", n)
	}
	if got := claim(); got.Owner != "other" {
		t.Errorf("the letter's state %+v, want the other run's claim as it wrote it", got)
	}
}

// TestReplayFindPausesBetweenReads looks for a letter's unconfirmed put
// in a shard of several pages, on a manual clock: each GetRecords of a
// shard after its first waits readPause (Kinesis serves a shard five a
// second); they were sent back to back.
func TestReplayFindPausesBetweenReads(t *testing.T) {
	f := newFixture(t)
	defer func(n int32) { getRecordsLimit = n }(getRecordsLimit)
	getRecordsLimit = 1
	ctx := t.Context()
	// Letter 1000-0-0's record, key k1, lies in the second shard, after
	// two others.
	for _, r := range []struct{ key, data, hash string }{{"filler", "x", "340282366920938463463374607431768211455"}, {"filler", "y", "340282366920938463463374607431768211455"}, {"k1", "a", ""}} {
		in := &kinesis.PutRecordInput{StreamName: &f.stream, Data: []byte(r.data), PartitionKey: aws.String(r.key)}
		if r.hash != "" {
			in.ExplicitHashKey = aws.String(r.hash)
		}
		if _, err := f.c.PutRecord(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	d, err := os.OpenFile(filepath.Join(f.dir, journalName), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := (&journal{f: d}).add(journalEntry{ID: "1000-0-0", State: statePutting, Stream: f.stream, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	d.Close()
	tr, err := faults.New(faults.Config{})
	if err != nil {
		t.Fatal(err)
	}
	c := servers.Env(t).Kinesis(func(o *kinesis.Options) { o.HTTPClient = tr })
	m := clock.NewManual(time.Now())
	running, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	var out bytes.Buffer
	go func() {
		defer stop()
		done <- replay(ctx, func() (*kinesis.Client, error) { return c, nil }, m, f.dir, f.stream, []string{"1000-0-0"}, &out)
	}()
	pauses := 0
	for m.WaitForWaiters(running, 1) == nil {
		n := tr.Requests("GetRecords")
		m.Advance(readPause - time.Nanosecond)
		if m.Waiters() != 1 || tr.Requests("GetRecords") != n {
			t.Fatalf("the search read again %v into a pause of %v", readPause-time.Nanosecond, readPause)
		}
		m.Advance(time.Nanosecond)
		pauses++
	}
	if err := <-done; err != nil || !strings.Contains(out.String(), "1000-0-0: found in "+f.stream) {
		t.Fatalf("replay = %v\n%s\nwant the letter found in the stream", err, out.String())
	}
	// The first shard is empty; the second has three pages, and the
	// record on the third.
	if got, shards := tr.Requests("GetRecords"), 2; pauses != got-shards {
		t.Errorf("%d GetRecords of %d shards, and %d pauses, want one before each read of a shard but its first", got, shards, pauses)
	}
}

// TestReplayPutIntoGoneStream replays, from a directory and a table, a
// letter left putting into a stream that no longer exists: it failed at
// every run with Kinesis's ResourceNotFoundException, and no fix. The
// error now says the stream is gone and how to have the letter put again;
// done, the next replay puts it, once.
func TestReplayPutIntoGoneStream(t *testing.T) {
	for _, store := range []string{"dir", "table"} {
		t.Run(store, func(t *testing.T) {
			ctx := t.Context()
			f := newFixture(t)
			var s tableStore
			if store == "table" {
				f, s = newTableFixture(t)
			}
			gone := f.stream + "-gone"
			putting := journalEntry{ID: f.ids[1], State: statePutting, Stream: gone, At: time.Now()}
			if store == "table" {
				if err := s.mark(ctx, tableLetter(f.batches[0][1]), journalEntry{}, putting); err != nil {
					t.Fatal(err)
				}
			} else {
				d, err := os.OpenFile(filepath.Join(f.dir, journalName), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
				if err != nil {
					t.Fatal(err)
				}
				if err := (&journal{f: d}).add(putting); err != nil {
					t.Fatal(err)
				}
				d.Close()
			}
			args := append([]string{"deadletters", "replay", "-stream", f.stream, "-id", f.ids[1]}, f.store...)
			out, err := f.cmd(t, args...)
			if err == nil || !strings.Contains(err.Error(), gone+" no longer exists") {
				t.Fatalf("replay = %v\n%s\nwant an error saying %s no longer exists", err, out, gone)
			}
			// The operator does what the error says.
			if store == "table" {
				_, cmd, _ := strings.Cut(err.Error(), "aws dynamodb update-item --table-name "+s.table+" --key '")
				keyJSON, rest, _ := strings.Cut(cmd, "' ")
				if !strings.HasPrefix(rest, "--update-expression 'REMOVE #r' --expression-attribute-names '{\"#r\":\"replay\"}'") {
					t.Fatalf("replay = %v\nwant the update-item that removes the replay state", err)
				}
				var key map[string]map[string]string
				if err := json.Unmarshal([]byte(keyJSON), &key); err != nil {
					t.Fatalf("the key of the update-item: %v", err)
				}
				k := map[string]types.AttributeValue{}
				for name, v := range key {
					if n, ok := v["N"]; ok {
						k[name] = &types.AttributeValueMemberN{Value: n}
					} else {
						k[name] = &types.AttributeValueMemberS{Value: v["S"]}
					}
				}
				if _, err := s.c.UpdateItem(ctx, &ddb.UpdateItemInput{TableName: &s.table, Key: k, UpdateExpression: aws.String("REMOVE #r"),
					ExpressionAttributeNames: map[string]string{"#r": replayAttr}}); err != nil {
					t.Fatal(err)
				}
			} else {
				_, line, ok := strings.Cut(err.Error(), "while no replay runs: ")
				line, _, _ = strings.Cut(line, ", then run replay again")
				if !ok || !json.Valid([]byte(line)) {
					t.Fatalf("replay = %v\nwant the journal line to append", err)
				}
				d, err := os.OpenFile(filepath.Join(f.dir, journalName), os.O_WRONLY|os.O_APPEND, 0o600)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := d.WriteString(line + "\n"); err != nil {
					t.Fatal(err)
				}
				d.Close()
			}
			f.replay(t, f.ids[1])
			if diff := cmp.Diff([]string{"k2=b"}, f.records(t)); diff != "" {
				t.Errorf("stream after the replay (-want +got):\n%s", diff)
			}
		})
	}
}
