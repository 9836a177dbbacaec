package dynamotable

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TestWait checks Wait's verdicts and warnings at their edges: a usable
// status at once, a stuck one at once, a wait warned about once at
// WarnAfter (at once for an unknown status) and ended at MaxWait, each
// naming the table, its status and the fix, and the end of a warned wait
// logged.
func TestWait(t *testing.T) {
	start := time.Unix(1_000_000, 0)
	for _, tc := range []struct {
		name     string
		statuses []types.TableStatus // one a second
		usable   bool
		err      string // in the error, "" for none
		warns    int
	}{
		{"active", []types.TableStatus{types.TableStatusActive}, true, "", 0},
		{"updating", []types.TableStatus{types.TableStatusUpdating}, true, "", 0},
		{"archived", []types.TableStatus{types.TableStatusArchived}, false, "ARCHIVED", 0},
		{"creating, then active", []types.TableStatus{types.TableStatusCreating, types.TableStatusActive}, true, "", 0},
		{"missing, then active", []types.TableStatus{Missing, types.TableStatusActive}, true, "", 0},
		{"unknown, then active", []types.TableStatus{"MIGRATING", types.TableStatusActive}, true, "", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			w := Wait{Table: "tbl", Prefix: "test", Logger: slog.New(slog.NewTextHandler(&logs, nil))}
			var usable bool
			var err error
			for i, s := range tc.statuses {
				usable, err = w.Check(s, start.Add(time.Duration(i)*time.Second))
			}
			if usable != tc.usable || (err != nil) != (tc.err != "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("Check: %v, %v; want usable %v, error naming %q", usable, err, tc.usable, tc.err)
			}
			if got := strings.Count(logs.String(), "level=WARN"); got != tc.warns {
				t.Errorf("%d warnings, want %d:\n%s", got, tc.warns, logs.String())
			}
		})
	}
	for _, status := range []types.TableStatus{types.TableStatusCreating, types.TableStatusDeleting, Missing, "MIGRATING"} {
		t.Run("stays "+string(status), func(t *testing.T) {
			var logs bytes.Buffer
			w := Wait{Table: "tbl", Prefix: "test", Logger: slog.New(slog.NewTextHandler(&logs, nil))}
			var err error
			var at time.Duration
			for ; err == nil && at <= 2*MaxWait; at += time.Second {
				_, err = w.Check(status, start.Add(at))
			}
			if err == nil || at-time.Second != MaxWait || !strings.Contains(err.Error(), "tbl") ||
				!strings.Contains(err.Error(), string(status)) || !strings.Contains(err.Error(), "fix:") {
				t.Fatalf("Check after %v: %v, want an error at %v naming the table, the status and the fix", at-time.Second, err, MaxWait)
			}
			warns := strings.Split(strings.TrimSpace(logs.String()), "\n")
			if len(warns) != 1 || !strings.Contains(warns[0], "level=WARN") || !strings.Contains(warns[0], "table=tbl") ||
				!strings.Contains(warns[0], "status="+string(status)) || !strings.Contains(warns[0], "fix=") {
				t.Errorf("log, want one WARN naming the table, the status and the fix:\n%s", logs.String())
			}
		})
	}
}

// TestWaitUnbounded checks that an Unbounded wait (a user's table, perhaps
// being restored) never gives up, and warns at WarnAfter and again every
// RewarnEvery, each time naming the table and its status, and saying it
// goes on waiting (not to start again).
func TestWaitUnbounded(t *testing.T) {
	start := time.Unix(1_000_000, 0)
	var logs bytes.Buffer
	w := Wait{Table: "tbl", Prefix: "test", Logger: slog.New(slog.NewTextHandler(&logs, nil)), Unbounded: true}
	const waited = 3 * time.Hour
	for at := time.Duration(0); at <= waited; at += time.Second {
		if usable, err := w.Check(types.TableStatusCreating, start.Add(at)); usable || err != nil {
			t.Fatalf("Check after %v: %v, %v; want a wait that goes on", at, usable, err)
		}
	}
	text := logs.String()
	want := 1 + int((waited-WarnAfter)/RewarnEvery)
	if got := strings.Count(text, "level=WARN"); got != want || strings.Count(text, "table=tbl status=CREATING") != want ||
		strings.Count(text, "weir goes on waiting") != want || strings.Contains(text, "start again") {
		t.Errorf("%d warnings, want %d naming the table and its status:\n%s", got, want, text)
	}
}
