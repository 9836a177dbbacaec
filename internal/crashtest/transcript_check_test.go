//go:build unix

package crashtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCheckOutput runs the checker on hand-written outputs, good and bad.
func TestCheckOutput(t *testing.T) {
	const (
		s0 = "shardId-000000000000"
		s1 = "shardId-000000000001"
	)
	put := map[int64]bool{1: true, 2: true, 3: true, 4: true}
	tests := []struct {
		name     string
		out      string
		stateful bool
		want     figures // Put, Maybe left out
		wantErr  string  // a substring of the first error, "" for none
	}{{
		name: "clean",
		out: "start a\nbegin 100\nr 1 " + s0 + "\nr 2 " + s1 + "\nend 100\ndone 100\n" +
			"begin 200\nr 3 " + s0 + "\nr 4 " + s1 + "\nend 200\ndone 200\n",
		want: figures{Procs: 1, Batches: 2, Runs: 2, Done: 2},
	}, {
		name: "killed inside a batch, torn line, re-run",
		out: "start a\nbegin 100\nr 1 " + s0 + "\nr 2 " + s1 + "\nend 100\ndone 100\n" +
			"begin 200\nr 3 " + s0 + "\nr 4 shar\n#torn\nstart b\n" +
			"begin 200\nr 3 " + s0 + "\nr 4 " + s1 + "\nend 200\ndone 200\n",
		want: figures{Procs: 2, Batches: 2, Runs: 3, Done: 2, Rerun: 1, Duplicates: 1, Torn: 1},
	}, {
		name: "complete run not logged complete runs again",
		out: "start a\nbegin 100\nr 1 " + s0 + "\nr 2 " + s1 + "\nend 100\nstart b\n" +
			"begin 100\nr 1 " + s0 + "\nr 2 " + s1 + "\nend 100\ndone 100\nbegin 200\nr 3 " + s0 + "\nr 4 " + s1 + "\nend 200\ndone 200\nbegin 300\nr 5",
		want: figures{Procs: 2, Batches: 3, Runs: 4, Done: 2, Rerun: 1, Duplicates: 2, Torn: 1},
		// batch 300 begun, never completed
		wantErr: "batch 300: begun 1 times",
	}, {
		name: "empty batch killed, not run again",
		out: "start a\nbegin 100\nr 1 " + s0 + "\nend 100\ndone 100\nbegin 200\nstart b\n" +
			"begin 300\nr 2 " + s1 + "\nr 3 " + s0 + "\nr 4 " + s1 + "\nend 300\ndone 300\n",
		want: figures{Procs: 2, Batches: 3, Runs: 3, Done: 2},
	}, {
		name:    "lost record",
		out:     "start a\nbegin 100\nr 1 " + s0 + "\nr 2 " + s1 + "\nr 3 " + s0 + "\nend 100\ndone 100\n",
		want:    figures{Procs: 1, Batches: 1, Runs: 1, Done: 1},
		wantErr: "1 records put are in no complete batch",
	}, {
		name: "re-run with other records",
		out: "start a\nbegin 100\nr 1 " + s0 + "\nr 2 " + s1 + "\nend 100\nstart b\n" +
			"begin 100\nr 1 " + s0 + "\nr 3 " + s0 + "\nr 2 " + s1 + "\nr 4 " + s1 + "\nend 100\ndone 100\n",
		want:    figures{Procs: 2, Batches: 1, Runs: 2, Done: 1, Rerun: 1, Duplicates: 2},
		wantErr: "not those of its first complete run",
	}, {
		name: "completed batch runs again",
		out: "start a\nbegin 100\nr 1 " + s0 + "\nr 2 " + s1 + "\nend 100\ndone 100\nbegin 200\nr 3 " + s0 + "\nr 4 " + s1 + "\nend 200\ndone 200\n" +
			"start b\nbegin 100\nr 1 " + s0 + "\nr 2 " + s1 + "\nend 100\ndone 100\n",
		want:    figures{Procs: 2, Batches: 2, Runs: 3, Done: 3, Rerun: 1, Duplicates: 2},
		wantErr: "had its completion logged (done at line 6) (G3)",
	}, {
		name: "last batch of a process logged complete runs again",
		out: "start a\nbegin 100\nr 1 " + s0 + "\nr 2 " + s1 + "\nend 100\ndone 100\n" +
			"start b\nbegin 100\nr 1 " + s0 + "\nr 2 " + s1 + "\nend 100\ndone 100\n" +
			"begin 200\nr 3 " + s0 + "\nr 4 " + s1 + "\nend 200\ndone 200\n",
		want:    figures{Procs: 2, Batches: 2, Runs: 3, Done: 3, Rerun: 1, Duplicates: 2},
		wantErr: "had its completion logged (done at line 6) (G3)",
	}, {
		name: "empty batch logged complete runs again, stateful",
		out: "start a\nbegin 100\nr 1 " + s0 + "\nr 2 " + s1 + "\nend 100\ndone 100\nbegin 200\nend 200\ndone 200\nbegin 300\nend 300\ndone 300\n" +
			"start b\nbegin 200\nend 200\ndone 200\nbegin 300\nend 300\ndone 300\nbegin 400\nr 3 " + s0 + "\nr 4 " + s1 + "\nend 400\ndone 400\n",
		stateful: true,
		want:     figures{Procs: 2, Batches: 4, Runs: 6, Done: 6, Rerun: 2},
	}, {
		name: "more than 10 s of empty batches logged complete run again, stateful",
		out: "start a\nbegin 100\nr 1 " + s0 + "\nr 2 " + s1 + "\nend 100\ndone 100\nbegin 200\nend 200\ndone 200\nbegin 10300\nend 10300\ndone 10300\n" +
			"start b\nbegin 200\nend 200\ndone 200\nbegin 10300\nend 10300\ndone 10300\nbegin 10400\nr 3 " + s0 + "\nr 4 " + s1 + "\nend 10400\ndone 10400\n",
		stateful: true,
		want:     figures{Procs: 2, Batches: 4, Runs: 6, Done: 6, Rerun: 2},
		wantErr:  "batches 200 to 10300: 2 empty batches logged complete ran again",
	}, {
		name: "empty batch logged complete runs again, stateless",
		out: "start a\nbegin 100\nr 1 " + s0 + "\nr 2 " + s1 + "\nend 100\ndone 100\nbegin 200\nend 200\ndone 200\n" +
			"start b\nbegin 200\nend 200\ndone 200\nbegin 400\nr 3 " + s0 + "\nr 4 " + s1 + "\nend 400\ndone 400\n",
		want:    figures{Procs: 2, Batches: 3, Runs: 4, Done: 4, Rerun: 1},
		wantErr: "had its completion logged (done at line 9) (G3)",
	}, {
		name: "batch followed by another without a done line",
		out: "start a\nbegin 100\nr 1 " + s0 + "\nr 2 " + s1 + "\nend 100\n" +
			"begin 200\nr 3 " + s0 + "\nr 4 " + s1 + "\nend 200\ndone 200\n",
		want:    figures{Procs: 1, Batches: 2, Runs: 2, Done: 1},
		wantErr: "batch 100: run at line 2 was followed by batch 200 in its process but has no done line",
	}, {
		name: "record in two batches",
		out: "start a\nbegin 100\nr 1 " + s0 + "\nr 2 " + s1 + "\nend 100\ndone 100\n" +
			"begin 200\nr 2 " + s1 + "\nr 3 " + s0 + "\nr 4 " + s1 + "\nend 200\ndone 200\n",
		want:    figures{Procs: 1, Batches: 2, Runs: 2, Done: 2, Duplicates: 1},
		wantErr: "record 2 is in batches 100 and 200",
	}, {
		name: "shard out of order",
		out: "start a\nbegin 100\nr 3 " + s0 + "\nr 2 " + s1 + "\nend 100\ndone 100\n" +
			"begin 200\nr 1 " + s0 + "\nr 4 " + s1 + "\nend 200\ndone 200\n",
		want:    figures{Procs: 1, Batches: 2, Runs: 2, Done: 2},
		wantErr: "out of order",
	}, {
		name: "batch time going back",
		out: "start a\nbegin 200\nr 1 " + s0 + "\nr 2 " + s1 + "\nend 200\ndone 200\n" +
			"begin 100\nr 3 " + s0 + "\nr 4 " + s1 + "\nend 100\ndone 100\n",
		want:    figures{Procs: 1, Batches: 2, Runs: 2, Done: 2},
		wantErr: "not after every earlier batch time",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := parseOutput(tt.out)
			if err != nil {
				t.Fatal(err)
			}
			tr.stateful = tt.stateful
			got, errs := checkOutput(tr, put, nil)
			got.Put, got.Maybe = 0, 0
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("figures (-want +got):\n%s", diff)
			}
			switch {
			case tt.wantErr == "" && len(errs) > 0:
				t.Errorf("unexpected violations: %v", errs)
			case tt.wantErr != "" && (len(errs) == 0 || !strings.Contains(errs[0].Error(), tt.wantErr)):
				t.Errorf("violations %v, want first to contain %q", errs, tt.wantErr)
			}
		})
	}
}

// TestParseOutputRefusesDisorder checks that lines out of place are errors,
// not silently skipped.
func TestParseOutputRefusesDisorder(t *testing.T) {
	for _, out := range []string{
		"begin 100\n",                                       // before any start
		"start a\nbegin 100\nbegin 200\n",                   // begin inside a run
		"start a\nr 1 shardId-000000000000\n",               // record outside a run
		"start a\nbegin 100\nend 200\n",                     // end of another run
		"start a\nhello\n",                                  // unknown
		"#torn\n",                                           // torn with nothing before
		"start a\ndone 100\n",                               // done with no run
		"start a\nbegin 100\ndone 100\n",                    // done inside a run
		"start a\nbegin 100\nend 100\ndone 200\n",           // done of another time
		"start a\nbegin 100\nend 100\ndone 100\ndone 100\n", // done twice
		"start a\nbegin 100\nend 100\nstart b\ndone 100\n",  // done of another process's run
	} {
		if _, err := parseOutput(out); err == nil {
			t.Errorf("parseOutput(%q) = nil error, want one", out)
		}
	}
}

// TestOpenBatchFileMarksTornLine checks that opening an output whose last
// line was cut short by a kill ends that line and marks it torn, so the
// parser drops it.
func TestOpenBatchFileMarksTornLine(t *testing.T) {
	tests := []struct {
		name, before, want string
	}{
		{"new file", "", "start b\n"},
		{"whole lines", "start a\n", "start a\nstart b\n"},
		{"torn line", "start a\nbegin 100\nr 12", "start a\nbegin 100\nr 12\n#torn\nstart b\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "out.txt")
			if tt.before != "" {
				if err := os.WriteFile(path, []byte(tt.before), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			w, err := openBatchFile(path, "b", 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Errorf("file (-want +got):\n%s", diff)
			}
			if _, err := parseOutput(string(got)); err != nil {
				t.Errorf("parseOutput: %v", err)
			}
		})
	}
}

// TestCompletedLastWantsTheLastChildsOwnCompletions checks the final
// drain's wait (awaitLastRecords) on outputs written after the torture
// runs that failed checkLeases, their leases handed back short of the
// shards' last records, as the harness read them. First
// (TestCrashTortureDynamoSink under -race, seed 1796151225289628155): a
// killed child output every record, so awaitOutput was satisfied, and the
// last child completed a batch past its recovery, so awaitPastRecovery
// was too, but it had not yet read again the records the killed child
// completed and did not checkpoint. Then (seed 1796153117860581669): the
// last child had output both last records, but its batch's sink writes
// were still running, and outlasted the lease duration the receiver's
// stop waits for completions. The wait must hold until the last child
// completed a batch holding each shard's last record (its done line), or
// the shard is checkpointed at it.
func TestCompletedLastWantsTheLastChildsOwnCompletions(t *testing.T) {
	const (
		s0 = "shardId-000000000000"
		s1 = "shardId-000000000001"
	)
	last := map[string]int64{s0: 8, s1: 9}
	// The last child's own lines (the killed child's, with records 8 and
	// 9, come before its start line).
	early := "\nbegin 1200\nr 5 " + s0 + "\nend 1200\ndone 1200\n"
	output := early + "begin 1400\nr 8 " + s0 + "\nr 9 " + s1 + "\nend 1400\n"
	for _, tc := range []struct {
		name         string
		mine         string
		checkpointed map[string]bool
		want         bool
	}{
		{"not read again yet", early, nil, false},
		{"one shard read again", early + "begin 1400\nr 8 " + s0 + "\n", nil, false},
		{"one shard read again, the other checkpointed", early + "begin 1400\nr 8 " + s0 + "\n", map[string]bool{s1: true}, false},
		{"one shard completed, the other checkpointed", early + "begin 1400\nr 8 " + s0 + "\nend 1400\ndone 1400\n", map[string]bool{s1: true}, true},
		{"both output, not completed", output, nil, false},
		{"both completed", output + "done 1400\n", nil, true},
		{"both completed, a later batch begun", output + "done 1400\nbegin 1600\n", nil, true},
		{"an earlier batch's done line", early + "begin 1400\nr 8 " + s0 + "\nr 9 " + s1 + "\nend 1400\nbegin 1600\nend 1600\ndone 1200\n", nil, false},
		{"a torn last line", early + "begin 1400\nr 8 " + s0 + "\nr 9 " + s1, nil, false},
		{"both checkpointed", "\n", map[string]bool{s0: true, s1: true}, true},
	} {
		if got := completedLast(tc.mine, last, tc.checkpointed); got != tc.want {
			t.Errorf("%s: completedLast = %v, want %v", tc.name, got, tc.want)
		}
	}
}
