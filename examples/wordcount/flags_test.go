package main

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestParseFlags checks that good command lines parse to the options they
// mean and that every bad flag is reported, all of them in one error.
func TestParseFlags(t *testing.T) {
	defaults := options{source: "local", leases: true, app: "wordcount", shards: 2, batch: time.Second,
		rate: 200, top: 5, out: "wordcount-out"}
	with := func(f func(*options)) options { o := defaults; f(&o); return o }
	tests := []struct {
		name     string
		args     []string
		env      map[string]string
		want     options
		problems []string // each must appear in the error; nil: no error
	}{
		{name: "defaults", want: defaults},
		{name: "memory", args: []string{"-source", "memory", "-top", "0", "-rate", "10", "-duration", "5s"},
			want: with(func(o *options) { o.source, o.top, o.rate, o.duration = "memory", 0, 10, 5*time.Second })},
		{name: "stream from the environment", env: map[string]string{"WEIR_STREAM": "words"},
			want: with(func(o *options) { o.source, o.stream = "kinesis", "words" })},
		{name: "real stream", args: []string{"-stream", "words", "-endpoint", "http://127.0.0.1:4567", "-leases=false", "-region", "eu-west-1"},
			want: with(func(o *options) {
				o.source, o.stream, o.endpoint, o.leases, o.region = "kinesis", "words", "http://127.0.0.1:4567", false, "eu-west-1"
			})},
		{name: "the issue's three", args: []string{"-top", "-1", "-duration", "-5s", "-rate", "-5"},
			problems: []string{"-top -1: must be >= 0", "-duration -5s: must be >= 0", "-rate -5: must be >= 10"}},
		{name: "numbers", args: []string{"-shards", "0", "-batch", "0s", "-rate", "9"},
			problems: []string{"-shards 0: must be >= 1", "-batch 0s: must be > 0", "-rate 9: must be >= 10"}},
		{name: "sub-millisecond batch", args: []string{"-batch", "1500us"},
			problems: []string{"-batch 1.5ms: must be a whole number of milliseconds, such as 2ms"}},
		{name: "unknown source", args: []string{"-source", "kafka"},
			problems: []string{`-source "kafka": must be "local", "memory" or "kinesis"`}},
		{name: "kinesis without stream", args: []string{"-source", "kinesis"},
			problems: []string{"-source kinesis without -stream"}},
		{name: "flags for another source", args: []string{"-source", "memory", "-endpoint", "http://127.0.0.1:1", "-leases=false"},
			problems: []string{"-endpoint given with -source memory", "-leases given with -source memory"}},
		{name: "generated-only flags on a real stream", args: []string{"-stream", "words", "-shards", "4", "-rate", "100"},
			problems: []string{"-shards given with -source kinesis", "-rate given with -source kinesis"}},
		{name: "stream with the local source", args: []string{"-source", "local", "-stream", "words"},
			problems: []string{`-stream "words" given with -source local`}},
		{name: "status page off loopback", args: []string{"-http", "0.0.0.0:8080"},
			problems: []string{`-http "0.0.0.0:8080": not a loopback address`}},
		{name: "status page hosts without the page", args: []string{"-http-hosts", "status.internal"},
			problems: []string{`-http-hosts given without -http`}},
		{name: "status page address", args: []string{"-http", "8080"},
			problems: []string{`-http "8080": address 8080: missing port in address (want host:port`}},
		{name: "bad endpoints", args: []string{"-stream", "s", "-endpoint", "localhost:4567", "-dynamodb-endpoint", "ftp://x"},
			problems: []string{`-endpoint "localhost:4567": must be an http or https URL`, `-dynamodb-endpoint "ftp://x": must be an http or https URL`}},
		{name: "bad app and out", args: []string{"-app", "a b", "-out", ""},
			problems: []string{`-app "a b": must be 3 to 255`, `-out "": name the directory`}},
		{name: "positional argument", args: []string{"words"},
			problems: []string{`unexpected argument "words"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			got, err := parseFlags(tt.args, func(k string) string { return tt.env[k] }, &stderr)
			if tt.problems == nil {
				if err != nil {
					t.Fatalf("parseFlags(%q): %v", tt.args, err)
				}
				if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(options{}, monitorOptions{})); diff != "" {
					t.Errorf("parseFlags(%q) (-want +got):\n%s", tt.args, diff)
				}
				return
			}
			if !errors.Is(err, errInvalidFlags) {
				t.Fatalf("parseFlags(%q) = %v, want errInvalidFlags", tt.args, err)
			}
			lines := strings.Split(err.Error(), "\n")[1:]
			if len(lines) != len(tt.problems) {
				t.Errorf("parseFlags(%q) reported %d problems, want %d:\n%v", tt.args, len(lines), len(tt.problems), err)
			}
			for _, p := range tt.problems {
				if !strings.Contains(err.Error(), p) {
					t.Errorf("parseFlags(%q) error lacks %q:\n%v", tt.args, p, err)
				}
			}
			if stderr.Len() > 0 {
				t.Errorf("parseFlags printed %q; problems are returned, not printed", stderr.String())
			}
		})
	}
}

// TestParseFlagsSyntax checks that a flag that does not parse is left to the
// flag package, which prints it with the usage.
func TestParseFlagsSyntax(t *testing.T) {
	var stderr bytes.Buffer
	_, err := parseFlags([]string{"-top", "many"}, func(string) string { return "" }, &stderr)
	if err == nil || errors.Is(err, errInvalidFlags) {
		t.Fatalf("parseFlags(-top many) = %v, want the flag package's error", err)
	}
	if !strings.Contains(stderr.String(), "-top") || !strings.Contains(stderr.String(), "Usage") {
		t.Errorf("stderr lacks the error and the usage:\n%s", stderr.String())
	}
	if _, err := parseFlags([]string{"-h"}, func(string) string { return "" }, &stderr); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("parseFlags(-h) = %v, want flag.ErrHelp", err)
	}
}

// TestMainBadFlags runs the program with bad flags and checks that it exits
// with status 2 at once, naming every bad flag.
func TestMainBadFlags(t *testing.T) {
	for _, tt := range []struct{ args, named []string }{
		{[]string{"-top", "-1", "-duration", "-5s", "-rate", "-5"}, []string{"-top -1", "-duration -5s", "-rate -5"}},
		{[]string{"-top", "many"}, []string{"-top"}},
	} {
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestHelperMain$")
		cmd.Env = append(os.Environ(), "WORDCOUNT_HELPER_ARGS="+strings.Join(tt.args, " "))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 {
			t.Errorf("wordcount %q: got %v, want exit status 2; stderr:\n%s", tt.args, err, stderr.String())
		}
		for _, n := range tt.named {
			if !strings.Contains(stderr.String(), n) {
				t.Errorf("wordcount %q: stderr does not name %q:\n%s", tt.args, n, stderr.String())
			}
		}
	}
}

// TestHelperMain is the body of TestMainBadFlags's processes: main with the
// space-separated arguments in WORDCOUNT_HELPER_ARGS.
func TestHelperMain(t *testing.T) {
	args, ok := os.LookupEnv("WORDCOUNT_HELPER_ARGS")
	if !ok {
		return // not a helper process
	}
	os.Args = append([]string{"wordcount"}, strings.Fields(args)...)
	main()
	t.Fatal("main returned; it should have exited with status 2")
}
