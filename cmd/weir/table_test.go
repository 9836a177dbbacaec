package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/weirstream/weir/internal/letters/letterstest"
	"github.com/weirstream/weir/internal/localaws"
	dldynamodb "github.com/weirstream/weir/sink/deadletter/dynamodb"
	sinkddb "github.com/weirstream/weir/sink/dynamodb"
	"github.com/weirstream/weir/stream"
)

// TestListTable lists the letters of a DynamoDB dead-letter table, by
// batch time, output and index, through the command line (credentials
// and region from the environment, the endpoint from -endpoint).
func TestListTable(t *testing.T) {
	env := servers.Env(t)
	c := env.DynamoDB()
	name := letterstest.CreateTable(t, c)
	tab, err := dldynamodb.New(t.Context(), sinkddb.Config{Client: c, Table: name})
	if err != nil {
		t.Fatal(err)
	}
	for _, ls := range [][]stream.DeadLetter{
		{{Time: 2000, Output: 1, Index: 0, Record: []byte("c"), Encoding: "raw", Err: "boom"}},
		{{Time: 1000, Output: 0, Index: 0, Record: []byte("a"), Encoding: "raw", Err: "boom"},
			{Time: 1000, Output: 0, Index: 1, Record: []byte("b"), Encoding: "raw", Err: "panic: kaboom\nmore"}},
	} {
		if err := tab.Quarantine(t.Context(), ls); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "localaws")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "localaws")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	var out bytes.Buffer
	args := []string{"deadletters", "list", "-table", name, "-endpoint", env.DynamoDBEndpoint, "-region", localaws.Region}
	if err := run(t.Context(), args, &out, nil); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n")[1:] {
		f := strings.Fields(line)
		ids = append(ids, f[0])
		if !strings.Contains(line, "  no  ") {
			t.Errorf("line %q: want REPLAYED no", line)
		}
	}
	if got, want := strings.Join(ids, " "), "1000-0-0 1000-0-1 2000-1-0"; got != want {
		t.Errorf("listed %s, want %s:\n%s", got, want, out.String())
	}
	if err := run(t.Context(), []string{"deadletters", "list", "-table", name, "-dir", "d"}, &out, nil); err == nil || !strings.Contains(err.Error(), "-dir and -table") {
		t.Errorf("list with -dir and -table = %v, want refused", err)
	}
}
