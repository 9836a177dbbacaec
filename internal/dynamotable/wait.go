package dynamotable

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// MaxWait is how long weir waits for a table that is not usable yet
// (CREATING, DELETING, not yet visible after its creation, or of a status
// weir does not know) before giving up: DynamoDB makes a new table ACTIVE
// within seconds, a minute at most, while a table that stays CREATING
// longer (one being restored from a backup stays so until the restore
// ends) is no start-up wait, and a worker waiting on it silently would look
// hung.
const MaxWait = 5 * time.Minute

// RewarnEvery is how often an Unbounded wait is logged at WARN again after
// its first warning, so that a worker waiting for a user's table being
// restored (20 minutes to hours) is never silent for long.
const RewarnEvery = 5 * time.Minute

// WarnAfter is how long a wait for a table goes on before it is logged at
// WARN. A status weir does not know is logged at once.
const WarnAfter = 30 * time.Second

// Missing is the status Wait.Check takes for a table that DescribeTable
// does not find although it was created (by this process or another):
// DynamoDB has not made it visible yet.
const Missing types.TableStatus = "NOT_FOUND"

// Wait watches one wait for a table to become usable, so that every
// package waiting for a table bounds the wait and warns of it alike. Set
// the fields, then call Check with the status of each DescribeTable; a
// Wait is used by one goroutine.
type Wait struct {
	// Table is the table's name.
	Table string
	// Prefix starts every warning ("leasetable").
	Prefix string
	// Logger receives the warnings.
	Logger *slog.Logger
	// Unbounded makes the wait end only when the caller's ctx does, not
	// after MaxWait, warning again every RewarnEvery: for a table the user
	// gives (a sink's), which may be being restored from a backup or to a
	// point in time, CREATING until the restore ends, which AWS says takes
	// at least 20 minutes for a point in time, usually less than an hour,
	// and cannot be predicted. Weir's own tables keep MaxWait.
	Unbounded bool

	start    time.Time
	warned   bool
	lastWarn time.Time // of the last warning, if warned
}

// Check takes the status of one check of the table, made at now, and
// reports whether the table serves reads and writes (see Usable). A status
// no wait cures (see Stuck), or a table not usable for MaxWait since the
// first Check (unless Unbounded), is an error naming the table, its status
// and the fix; otherwise the caller checks again after a back-off. The
// wait is logged at WARN, naming the table, its status and the fix, once
// it reaches WarnAfter, or at once for a status weir does not know (and,
// if Unbounded, again every RewarnEvery); and at INFO when the table is
// usable after such a warning.
func (w *Wait) Check(status types.TableStatus, now time.Time) (usable bool, err error) {
	if w.start.IsZero() {
		w.start = now
	}
	waited := now.Sub(w.start)
	if Usable(status) {
		if w.warned {
			w.Logger.Info(w.Prefix+": table usable after the wait", "table", w.Table, "status", status, "waited", waited)
		}
		return true, nil
	}
	if err := Stuck(w.Table, status); err != nil {
		return false, err
	}
	if waited >= MaxWait && !w.Unbounded {
		return false, fmt.Errorf("table %s is still %s after %v of checks (weir waits at most %v for a table to be ACTIVE or UPDATING); fix: %s",
			w.Table, status, waited.Round(time.Second), MaxWait, Fix(status))
	}
	first := !w.warned && (waited >= WarnAfter || !known(status))
	if first || w.Unbounded && w.warned && now.Sub(w.lastWarn) >= RewarnEvery {
		w.warned, w.lastWarn = true, now
		limit, fix := any(MaxWait), Fix(status)
		if w.Unbounded {
			limit = "never (only when the caller's ctx ends)"
			fix = "none needed if the table is being created or restored (a restore from a backup or to a point in time keeps it CREATING until it ends): " +
				"weir goes on waiting; otherwise look at the table (aws dynamodb describe-table), or use another table name"
		}
		w.Logger.Warn(w.Prefix+": waiting for a table to be ACTIVE or UPDATING", "table", w.Table, "status", status,
			"waited", waited.Round(time.Millisecond), "gives_up_after", limit, "fix", fix)
	}
	return false, nil
}

// known reports whether status is one DynamoDB documents.
func known(status types.TableStatus) bool {
	for _, s := range status.Values() {
		if s == status {
			return true
		}
	}
	return status == Missing
}

// Fix is the fix of a table that stays of status, not usable.
func Fix(status types.TableStatus) string {
	switch status {
	case types.TableStatusCreating:
		return "wait until DynamoDB shows the table ACTIVE (one being restored from a backup stays CREATING until the restore ends), then start again; or use another table name"
	case types.TableStatusDeleting:
		return "the table is being deleted, not by weir: wait until it is gone, then start again (weir creates its own tables anew; a table given to a sink must be created again); or use another table name"
	case Missing:
		return "DynamoDB does not show the table that was created: check that the endpoint is one DynamoDB (not a balancer over several local servers) and the region; or use another table name"
	}
	return fmt.Sprintf("weir does not know the status %q: look at the table (aws dynamodb describe-table), and start again once it is ACTIVE; or use another table name", status)
}
