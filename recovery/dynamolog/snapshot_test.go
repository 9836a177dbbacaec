package dynamolog_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/internal/localaws"
	"github.com/weirstream/weir/internal/localaws/faults"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/recovery"
	"github.com/weirstream/weir/recovery/dynamolog"
)

// TestDynamoSnapshotTorn checks, on dynalite, that a snapshot written in
// several chunks whose head item is missing (a crash before the last put)
// or whose chunk is damaged is a *recovery.CorruptError, never misread,
// and that a new writer reads its predecessor's snapshot.
func TestDynamoSnapshotTorn(t *testing.T) {
	env := localaws.ForTest(t, localaws.Options{DynamoDB: true})
	client := env.DynamoDB()
	cfg := dynamolog.Config{Client: client, Table: table, Name: localaws.UniqueName(t)}
	ctx := t.Context()
	l := openDynamo(t, cfg)
	data := make([]byte, 2*dynamolog.SnapshotChunkSize+5)
	for i := range data {
		data[i] = byte(i)
	}
	ref, err := l.PutSnapshot(ctx, 7000, data)
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, recoverylog.SnapshotTaken(7000, ref))

	next := openDynamo(t, cfg) // a new writer: fences l, reads its snapshot
	got, err := next.GetSnapshot(ctx, recoverylog.SnapshotRef{Time: 7000, Ref: ref})
	if err != nil || string(got) != string(data) {
		t.Fatalf("GetSnapshot by the next writer: %d bytes, %v; want the %d put", len(got), err, len(data))
	}

	key := func(seq string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"log": &types.AttributeValueMemberS{Value: ref}, "seq": &types.AttributeValueMemberN{Value: seq}}
	}
	// Damage chunk 2.
	if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
		"log": key("2")["log"], "seq": key("2")["seq"], "type": &types.AttributeValueMemberS{Value: "chunk"},
		"data": &types.AttributeValueMemberB{Value: []byte("garbage")}}}); err != nil {
		t.Fatal(err)
	}
	var ce *recovery.CorruptError
	if _, err := next.GetSnapshot(ctx, recoverylog.SnapshotRef{Time: 7000, Ref: ref}); !errors.As(err, &ce) {
		t.Errorf("GetSnapshot of a damaged chunk: got %v, want a *recovery.CorruptError", err)
	}
	// Remove the head item: the write did not finish.
	if _, err := client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: key("0")}); err != nil {
		t.Fatal(err)
	}
	if _, err := next.GetSnapshot(ctx, recoverylog.SnapshotRef{Time: 7000, Ref: ref}); !errors.As(err, &ce) {
		t.Errorf("GetSnapshot without its head item: got %v, want a *recovery.CorruptError", err)
	}
	if _, err := next.GetSnapshot(ctx, recoverylog.SnapshotRef{Time: 1, Ref: "other#snapshot/x/1"}); !errors.Is(err, recovery.ErrNoSnapshot) {
		t.Errorf("GetSnapshot of another log's reference: got %v, want ErrNoSnapshot", err)
	}
}

// TestDynamoSnapshotOutage checks, on dynalite, that a snapshot whose puts
// get no answer for a while (one lands but its answer is lost, the next
// ones are dropped) is written whole once DynamoDB answers again.
func TestDynamoSnapshotOutage(t *testing.T) {
	_, tr, cfg := faultyLog(t)
	l := openDynamo(t, cfg)
	if err := tr.SetRules(
		faults.Rule{Operation: "PutItem", Kind: faults.DropResponse, Times: 1},
		faults.Rule{Operation: "PutItem", Kind: faults.DropRequest, Times: 5},
	); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, dynamolog.SnapshotChunkSize+5)
	for i := range data {
		data[i] = byte(i)
	}
	ref, err := l.PutSnapshot(t.Context(), 7000, data)
	if err != nil {
		t.Fatalf("PutSnapshot through an outage: %v", err)
	}
	if n := tr.Injected("PutItem", 0); n != 6 {
		t.Fatalf("%d faults injected, want 6", n)
	}
	got, err := l.GetSnapshot(t.Context(), recoverylog.SnapshotRef{Time: 7000, Ref: ref})
	if err != nil || string(got) != string(data) {
		t.Fatalf("GetSnapshot: %d bytes, %v; want the %d put", len(got), err, len(data))
	}
}

// TestDynamoSnapshotPutAgain checks, on dynalite, that storing a snapshot
// at a time again replaces it (recovery.SnapshotStore), also when the new
// one needs fewer chunk items than the one it replaces.
func TestDynamoSnapshotPutAgain(t *testing.T) {
	env := localaws.ForTest(t, localaws.Options{DynamoDB: true})
	cfg := dynamolog.Config{Client: env.DynamoDB(), Table: table, Name: localaws.UniqueName(t)}
	ctx := t.Context()
	l, err := cfg.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	store := l.(recovery.SnapshotStore)
	big := make([]byte, 2*dynamolog.SnapshotChunkSize+5)
	for i := range big {
		big[i] = byte(i)
	}
	if _, err := store.PutSnapshot(ctx, 7000, big); err != nil {
		t.Fatal(err)
	}
	ref, err := store.PutSnapshot(ctx, 7000, []byte("small"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := store.GetSnapshot(ctx, ref)
	if err != nil || string(got) != "small" {
		t.Fatalf("GetSnapshot after storing the snapshot at 7000 again: %d bytes, %v; want the 5 put last", len(got), err)
	}
}

// TestDynamoSnapshotReadThroughOutage checks, on dynalite, that a restart
// reading its snapshot while DynamoDB does not answer waits for it, as
// reading the log at Open does, instead of failing the restart.
func TestDynamoSnapshotReadThroughOutage(t *testing.T) {
	_, tr, cfg := faultyLog(t)
	l := openDynamo(t, cfg)
	ref, err := l.PutSnapshot(t.Context(), 7000, []byte("state"))
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, recoverylog.SnapshotTaken(7000, ref))
	next := openDynamo(t, cfg)
	if err := tr.SetRules(faults.Rule{Operation: "Query", Kind: faults.DropRequest, Times: 3}); err != nil {
		t.Fatal(err)
	}
	got, err := next.GetSnapshot(t.Context(), recoverylog.SnapshotRef{Time: 7000, Ref: ref})
	if err != nil || string(got) != "state" {
		t.Fatalf("GetSnapshot through an outage: %q, %v; want the snapshot put", got, err)
	}
	if n := tr.Injected("Query", 0); n != 3 {
		t.Fatalf("%d faults injected, want 3", n)
	}
}

// holdChunks is a DynamoDB client that holds the put of the first
// snapshot chunk item it is given, having closed held, until release is
// closed or the put's ctx ends.
type holdChunks struct {
	dynamolog.Client
	held, release chan struct{}
	once          sync.Once
}

func (c *holdChunks) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if typ, ok := in.Item["type"].(*types.AttributeValueMemberS); ok && typ.Value == "chunk" {
		c.once.Do(func() {
			close(c.held)
			select {
			case <-c.release:
			case <-ctx.Done():
			}
		})
	}
	return c.Client.PutItem(ctx, in, opts...)
}

// TestDynamoAppendDuringSnapshot checks, on dynalite, that an Append (a
// block pushed, a batch cut) completes while a state snapshot's chunk
// puts are under way, held here, rather than waiting for the whole upload
// of a large state; and that the snapshot, once put and referenced, and
// the entry are both read by the next writer.
func TestDynamoAppendDuringSnapshot(t *testing.T) {
	env := localaws.ForTest(t, localaws.Options{DynamoDB: true})
	hold := &holdChunks{Client: env.DynamoDB(), held: make(chan struct{}), release: make(chan struct{})}
	cfg := dynamolog.Config{Client: hold, Table: table, Name: localaws.UniqueName(t), AttemptTimeout: -1}
	ctx := t.Context()
	l := openDynamo(t, cfg)
	data := make([]byte, 2*dynamolog.SnapshotChunkSize+5)
	for i := range data {
		data[i] = byte(i)
	}
	var ref string
	put := make(chan error, 1)
	go func() {
		var err error
		ref, err = l.PutSnapshot(ctx, 7000, data)
		put <- err
	}()
	<-hold.held
	appended := make(chan error, 1)
	go func() { appended <- l.Append(ctx, block(0, 1)) }()
	bound := time.NewTimer(time.Minute) // a bound on a wait that never ends unless the Append waits for the puts, not a measure
	defer bound.Stop()
	waited := false
	select {
	case err := <-appended:
		if err != nil {
			t.Fatalf("Append during a snapshot's puts: %v", err)
		}
	case <-bound.C:
		waited = true
		t.Errorf("an Append waited a minute for a state snapshot's chunk puts, held meanwhile: appends must not wait for the upload of the state")
	}
	close(hold.release)
	if err := <-put; err != nil {
		t.Fatalf("PutSnapshot: %v", err)
	}
	if waited {
		if err := <-appended; err != nil {
			t.Fatalf("Append after the snapshot's puts: %v", err)
		}
	}
	mustAppend(t, l, recoverylog.SnapshotTaken(7000, ref))

	next := openDynamo(t, cfg) // a new writer: fences l, reads the log and its snapshot
	entries, err := next.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []recoverylog.Kind
	for _, e := range entries {
		kinds = append(kinds, e.Kind)
	}
	if diff := cmp.Diff([]recoverylog.Kind{recoverylog.KindBlockStored, recoverylog.KindSnapshot}, kinds); diff != "" {
		t.Errorf("entries read by the next writer (-want +got):\n%s", diff)
	}
	got, err := next.GetSnapshot(ctx, recoverylog.SnapshotRef{Time: 7000, Ref: ref})
	if err != nil || string(got) != string(data) {
		t.Fatalf("GetSnapshot by the next writer: %d bytes, %v; want the %d put", len(got), err, len(data))
	}
}
