package iamcheck

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/weirstream/weir/internal/letters/letterstest"
	"github.com/weirstream/weir/internal/localaws"
	"github.com/weirstream/weir/sink/deadletter"
	dldynamodb "github.com/weirstream/weir/sink/deadletter/dynamodb"
	"github.com/weirstream/weir/sink/dynamodb"
	"github.com/weirstream/weir/stream"
)

// TestReplayPolicy runs `weir deadletters replay` (cmd/weir, built here)
// through a recording proxy to kinesalite: the first run's put reaches the
// stream but its answer is lost, and the second run finds the record in
// the stream (ListShards, GetShardIterator, GetRecords) instead of putting
// it again. The calls are checked against kinesis-replay.json.
func TestReplayPolicy(t *testing.T) {
	t.Parallel()
	env := servers.Env(t)
	ctx := t.Context()
	tmp := t.TempDir()
	bin := buildWeir(t)
	streamName := localaws.UniqueName(t)
	// One shard, which the lost put fills: kinesalite never answers an
	// AT_TIMESTAMP GetShardIterator on an empty shard (mhart/kinesalite
	// issue 84).
	if err := env.CreateStream(ctx, streamName, 1); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(tmp, "dead")
	dead, err := deadletter.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := dead.Quarantine(ctx, []stream.DeadLetter{{Time: 1000, Record: []byte("c"), Encoding: "raw", Err: "boom"}}); err != nil {
		t.Fatal(err)
	}
	if err := dead.Close(); err != nil {
		t.Fatal(err)
	}

	target, err := url.Parse(env.KinesisEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	rt := &loseFirstPut{recorder: newRecorder(nil)}
	proxy := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite:   func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport: rt,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			t.Logf("proxy: %v", err) // the lost answer, or a failure the run reports
			w.WriteHeader(http.StatusBadGateway)
		},
	})
	defer proxy.Close()
	run := func() (string, error) {
		return runWeir(t, bin, "deadletters", "replay", "-dir", dir, "-stream", streamName, "-all",
			"-endpoint", proxy.URL, "-region", "us-east-1")
	}
	if out, err := run(); err == nil {
		t.Fatalf("the first replay, whose put lost its answer, succeeded:\n%s", out)
	}
	out, err := run()
	if err != nil {
		t.Fatalf("the second replay: %v\n%s", err, out)
	}
	if !strings.Contains(out, "found in "+streamName) {
		t.Fatalf("the second replay says:\n%s\nwant the letter found in the stream", out)
	}
	check(t, "kinesis-replay.json", "kinesis", rt.called())
}

// TestTableReplayPolicy runs `weir deadletters replay -table` (cmd/weir,
// built here) through a recording proxy to dynalite, twice (the second
// run finds the letter done), and checks the DynamoDB calls against
// dynamodb-deadletters-replay.json (TestReplayPolicy checks the Kinesis
// ones).
func TestTableReplayPolicy(t *testing.T) {
	t.Parallel()
	env := servers.Env(t)
	ctx := t.Context()
	bin := buildWeir(t)
	streamName := localaws.UniqueName(t)
	if err := env.CreateStream(ctx, streamName, 1); err != nil {
		t.Fatal(err)
	}
	table := letterstest.CreateTable(t, env.DynamoDB())
	dead, err := dldynamodb.New(ctx, dynamodb.Config{Client: env.DynamoDB(), Table: table})
	if err != nil {
		t.Fatal(err)
	}
	if err := dead.Quarantine(ctx, []stream.DeadLetter{{Time: 1000, Record: []byte("c"), Encoding: "raw", Err: "boom"}}); err != nil {
		t.Fatal(err)
	}
	target, err := url.Parse(env.DynamoDBEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	rt := &loseFirstPut{recorder: newRecorder(nil)} // DynamoDB has no PutRecord: it only records
	proxy := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target) }, Transport: rt})
	defer proxy.Close()
	for range 2 {
		out, err := runWeir(t, bin, "deadletters", "replay", "-table", table, "-table-endpoint", proxy.URL,
			"-stream", streamName, "-all", "-endpoint", env.KinesisEndpoint, "-region", "us-east-1")
		if err != nil {
			t.Fatalf("replay -table: %v\n%s", err, out)
		}
	}
	check(t, "dynamodb-deadletters-replay.json", "dynamodb", rt.called())
}

// buildWeir builds cmd/weir and returns the path of its binary.
func buildWeir(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "weir")
	if out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "../../cmd/weir").CombinedOutput(); err != nil {
		t.Fatalf("go build cmd/weir: %v\n%s", err, out)
	}
	return bin
}

// runWeir runs bin with args and static credentials only, and returns its
// output.
func runWeir(t *testing.T, bin string, args ...string) (string, error) {
	cmd := exec.CommandContext(t.Context(), bin, args...)
	cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID=local", "AWS_SECRET_ACCESS_KEY=local", "AWS_SESSION_TOKEN=",
		"AWS_PROFILE=", "AWS_CONFIG_FILE="+os.DevNull, "AWS_SHARED_CREDENTIALS_FILE="+os.DevNull, "AWS_EC2_METADATA_DISABLED=true")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// loseFirstPut is a proxy's transport that records each request's action,
// sends it, and loses the answer of the first PutRecord.
type loseFirstPut struct {
	*recorder

	mu   sync.Mutex
	lost bool
}

// errLost is the error the proxy answers a lost put with (502).
var errLost = errors.New("iamcheck: the answer of the first PutRecord is lost")

// RoundTrip records and sends req.
func (l *loseFirstPut) RoundTrip(req *http.Request) (*http.Response, error) {
	req.RequestURI = "" // the proxy's copy of a server request: the recorder's client refuses one set
	resp, err := l.Do(req)
	if err != nil || !strings.HasSuffix(req.Header.Get("X-Amz-Target"), ".PutRecord") {
		return resp, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost {
		return resp, nil
	}
	l.lost = true
	resp.Body.Close()
	return nil, fmt.Errorf("%w (%s)", errLost, resp.Status)
}
