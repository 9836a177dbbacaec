//go:build unix

package crashtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/recovery"
)

// A child process of the torture test inspects its checkpoint writes (a
// ddbSpy) and records them in a journal file beside the output, one line
// each, for the parent to check:
//
//	commit <shard> <seq>   a checkpoint write succeeded
//	past <what>            a checkpoint write passed the completed records (G4)
//	zombie <what>          a checkpoint write succeeded while the lease table
//	                       named another owner (see ddbSpy.worker)
const (
	journalCommit = "commit"
	journalPast   = "past"
	journalZombie = "zombie"
)

// journal is the append-only checkpoint journal of a child process.
type journal struct {
	mu sync.Mutex
	f  *os.File
}

// openJournal opens the journal at path for appending.
func openJournal(path string) (*journal, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("crashtest: open checkpoint journal: %w", err)
	}
	return &journal{f: f}, nil
}

// add appends one line; a nil journal ignores it. A failed write only
// weakens the check.
func (j *journal) add(kind, s string) {
	if j == nil {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	_, _ = j.f.WriteString(kind + " " + s + "\n")
}

// Close closes the file.
func (j *journal) Close() error { return j.f.Close() }

// readJournal returns the successful checkpoint writes and the violations
// (past the completed records, and zombie writes) in the whole lines of the
// journal at path (a killed child may leave a torn last line).
func readJournal(path string) (commits int, past, zombie []string, err error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil, nil, nil
	}
	if err != nil {
		return 0, nil, nil, err
	}
	s := string(data)
	s = s[:strings.LastIndexByte(s, '\n')+1]
	for l := range strings.Lines(s) {
		kind, rest, _ := strings.Cut(strings.TrimSuffix(l, "\n"), " ")
		switch kind {
		case journalCommit:
			commits++
		case journalPast:
			past = append(past, rest)
		case journalZombie:
			zombie = append(zombie, rest)
		default:
			return 0, nil, nil, fmt.Errorf("checkpoint journal %s: unknown line %q", path, l)
		}
	}
	return commits, past, zombie, nil
}

// modelOpener wraps a recovery log's Opener so that a logModel follows
// the log: at Open, what the log holds (a restarted child completes batches
// an earlier one logged), then every append once it succeeded, before the
// driver acts on it (so before the receiver learns of a completion).
type modelOpener struct {
	inner recovery.Opener
	model *logModel
}

// Open opens the wrapped log and reads it into the model.
func (o modelOpener) Open(ctx context.Context) (recovery.Log, error) {
	l, err := o.inner.Open(ctx)
	if err != nil {
		return nil, err
	}
	records, err := l.Read(ctx)
	var entries []recoverylog.Entry
	if err == nil {
		entries, err = recoverylog.DecodeEntries(records)
	}
	if err != nil {
		return nil, errors.Join(err, l.Close())
	}
	o.model.apply(entries)
	return modelLog{Log: l, model: o.model}, nil
}

// modelLog is a Log whose successful appends are applied to a logModel.
type modelLog struct {
	recovery.Log
	model *logModel
}

// Append appends to the wrapped log, then applies the records' entries to
// the model.
func (l modelLog) Append(ctx context.Context, records ...[]byte) error {
	if err := l.Log.Append(ctx, records...); err != nil {
		return err
	}
	entries, err := recoverylog.DecodeEntries(records)
	if err != nil {
		return err
	}
	l.model.apply(entries)
	return nil
}
