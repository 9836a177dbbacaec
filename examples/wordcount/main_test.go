package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirstream/weir/localaws"
)

// TestRun runs the example in each mode that needs no real AWS account for a
// short while and checks that it counted every line it produced and printed
// batches on the way. The runs take real time (about a second each) but
// nothing is asserted about time.
func TestRun(t *testing.T) {
	for _, source := range []string{"memory", "local"} {
		t.Run(source, func(t *testing.T) {
			var out bytes.Buffer
			o := options{source: source, app: "wordcount-test", shards: 2, batch: 100 * time.Millisecond,
				rate: 500, top: 3, duration: time.Second, state: t.TempDir(), out: t.TempDir()}
			if err := run(context.Background(), o, &out); err != nil {
				t.Fatalf("run: %v\noutput:\n%s", err, out.String())
			}
			produced := lastInt(t, &out, `produced (\d+) lines`)
			counted := lastInt(t, &out, `counted (\d+) lines`)
			if produced == 0 || counted != produced {
				t.Errorf("produced %d lines, counted %d\noutput:\n%s", produced, counted, out.String())
			}
			if !regexp.MustCompile(`batch \d\d:\d\d:\d\d\.\d{3}  lines [1-9]\d*  words [1-9]\d*  top \[\w+=\d+`).Match(out.Bytes()) {
				t.Errorf("no non-empty batch line in output:\n%s", out.String())
			}
			// The count files hold every word printed, once per batch.
			if got, want := fileWords(t, o.out), lastInt(t, &out, `total words (\d+)`); got != want {
				t.Errorf("count files hold %d words, the printed total is %d", got, want)
			}
		})
	}
}

// TestRunLocalTwiceOnRunningServers runs the local example twice on the
// same running servers, as it runs with weir-local's WEIR_*_ENDPOINT
// variables set: each run makes a stream of its own, and must count every
// line of it, not meet the lease table of the run before, whose
// checkpoints name another stream's records (it then refused its shards
// and counted nothing).
func TestRunLocalTwiceOnRunningServers(t *testing.T) {
	env := localaws.ForTest(t, localaws.Options{Kinesis: true, DynamoDB: true})
	t.Setenv(localaws.EnvKinesisEndpoint, env.KinesisEndpoint)
	t.Setenv(localaws.EnvDynamoDBEndpoint, env.DynamoDBEndpoint)
	for i := range 2 {
		var out bytes.Buffer
		o := options{source: "local", app: "wordcount-test", shards: 2, batch: 100 * time.Millisecond,
			rate: 500, top: 3, duration: 500 * time.Millisecond, state: t.TempDir(), out: t.TempDir()}
		if err := run(t.Context(), o, &out); err != nil {
			t.Fatalf("run %d: %v\noutput:\n%s", i+1, err, out.String())
		}
		produced := lastInt(t, &out, `produced (\d+) lines`)
		if counted := lastInt(t, &out, `counted (\d+) lines`); produced == 0 || counted != produced {
			t.Errorf("run %d: produced %d lines, counted %d\noutput:\n%s", i+1, produced, counted, out.String())
		}
	}
}

// fileWords returns the sum of the counts in the count files in dir.
func fileWords(t *testing.T, dir string) int {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "counts-*.txt"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no count files in %s: %v", dir, err)
	}
	n := 0
	for _, name := range names {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			if line == "" {
				continue
			}
			_, count, _ := strings.Cut(line, " ")
			c, err := strconv.Atoi(count)
			if err != nil {
				t.Fatalf("%s: line %q", name, line)
			}
			n += c
		}
	}
	return n
}

func TestRunBadFlags(t *testing.T) {
	for _, o := range []options{{source: "nope", out: "x"}, {source: "kinesis", out: "x"}, {source: "memory"}} {
		if err := run(context.Background(), o, new(bytes.Buffer)); err == nil {
			t.Errorf("run(%+v) = nil, want an error", o)
		}
	}
}

func lastInt(t *testing.T, out *bytes.Buffer, re string) int {
	t.Helper()
	m := regexp.MustCompile(re).FindAllSubmatch(out.Bytes(), -1)
	if len(m) == 0 {
		t.Fatalf("no %q in output:\n%s", re, out.String())
	}
	n, _ := strconv.Atoi(string(m[len(m)-1][1]))
	return n
}

// TestRunMemoryReturnsRunsError checks that when the pipeline cannot start
// (here its recovery log directory cannot be created), the memory demo
// returns Run's error at once, rather than only once its producer stops, at
// Ctrl-C or -duration, or when the unread lines fill the source. In virtual
// time: the producer sends every 100ms.
func TestRunMemoryReturnsRunsError(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) {
		o := options{source: "memory", app: "wordcount-test", shards: 2, batch: 100 * time.Millisecond,
			rate: 200, top: 3, state: filepath.Join(file, "state"), out: filepath.Join(file, "..", "out")}
		start := time.Now()
		err := run(t.Context(), o, new(bytes.Buffer))
		if err == nil || !strings.Contains(err.Error(), "recovery log") {
			t.Errorf("run = %v, want the recovery log's error", err)
		}
		if waited := time.Since(start); waited >= 100*time.Millisecond {
			t.Errorf("run returned Run's error after %v (virtual), want at once", waited)
		}
	})
}
