package main

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/internal/localaws"
	"github.com/weirstream/weir/sink/deadletter"
	weirkinesis "github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/stream"
)

// TestReplayEmptyData replays, into kinesalite, the letters of records of
// no data: a kinesis.Record whose Data is nil (JSON null) and a raw record
// of no bytes. Kinesis takes a record of no data, but the AWS SDK refuses
// a nil Data as a missing field, before sending the put: such a letter was
// refused at every replay, with the advice to run replay again.
func TestReplayEmptyData(t *testing.T) {
	env := servers.Env(t)
	f := &fixture{dir: filepath.Join(t.TempDir(), "dead"), stream: localaws.UniqueName(t), c: env.Kinesis()}
	f.store = []string{"-dir", f.dir}
	if err := env.CreateStream(t.Context(), f.stream, 1); err != nil {
		t.Fatal(err)
	}
	dead, err := deadletter.Open(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	rec, err := json.Marshal(weirkinesis.Record{PartitionKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	letters := []stream.DeadLetter{
		{Time: 1000, Output: 0, Index: 0, Record: rec, Encoding: "json", Err: "boom"},
		{Time: 1000, Output: 0, Index: 1, Record: nil, Encoding: "raw", Err: "boom"},
	}
	if err := dead.Quarantine(t.Context(), letters); err != nil {
		t.Fatal(err)
	}
	out, err := f.cmd(t, "deadletters", "replay", "-stream", f.stream, "-all", "-dir", f.dir)
	if err != nil {
		t.Fatalf("replay = %v, want nil: Kinesis takes records of no data\n%s", err, out)
	}
	if diff := cmp.Diff([]string{"1000-0-1=", "k="}, f.records(t)); diff != "" {
		t.Errorf("stream after the replay (-want +got):\n%s", diff)
	}
}
