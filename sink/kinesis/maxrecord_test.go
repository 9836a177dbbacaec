package kinesis_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/sink/kinesis"
)

// TestRaisedRecordLimitOnDefaultStream: MaxRecordBytes set above 1 MiB
// for a stream whose maximum record size was not raised (kinesalite's is
// 1 MiB). Kinesis refuses the record; the error names the fix: raise the
// stream's maximum record size, or lower MaxRecordBytes to it.
func TestRaisedRecordLimitOnDefaultStream(t *testing.T) {
	env := servers.Env(t)
	name := newStream(t, env, 1)
	s, err := kinesis.New(kinesis.Config[int]{Client: env.Kinesis(), Stream: name, MaxRecordBytes: 2 << 20,
		Record: func(n int) (string, []byte) { return "k", bytes.Repeat([]byte{'x'}, n) }})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Write(t.Context(), batch.New(1000, nil, []int{1<<20 + 100}))
	if err == nil {
		t.Fatal("kinesalite took a record over 1 MiB")
	}
	for _, want := range []string{"(fix: MaxRecordBytes is 2097152", "UpdateMaxRecordSize", name} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
}
