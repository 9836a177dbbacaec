package stream_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/recovery"
	"github.com/weirstream/weir/source"
	"github.com/weirstream/weir/source/memory"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/stream/internal/recoverycheck"
)

// shapedPipeline builds a pipeline of the given outputs on a fresh memory
// source: "each" is a ForEach, "print" a Print, anything else a
// ForEachBatch of that name.
func shapedPipeline(t *testing.T, cfg stream.Config, sourceName string, outputs ...string) *stream.Pipeline {
	t.Helper()
	p, err := stream.NewPipeline(cfg)
	if err != nil {
		t.Fatal(err)
	}
	src, err := memory.New[string](memory.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var opts []stream.Option
	if sourceName != "" {
		opts = append(opts, stream.Named(sourceName))
	}
	s := stream.From(p, src, opts...)
	for _, o := range outputs {
		switch o {
		case "each":
			stream.ForEach(s, func(context.Context, string) error { return nil })
		case "print":
			stream.Print(s, 1)
		default:
			stream.ForEachBatch(s, func(context.Context, *batch.Batch[string]) error { return nil }, stream.Named(o))
		}
	}
	return p
}

func TestShape(t *testing.T) {
	p := shapedPipeline(t, stream.Config{}, "words", "files", "each", "print")
	want := recovery.Shape{
		Sources: []recovery.Component{{Kind: "memory", Name: "words"}},
		Outputs: []recovery.Component{{Kind: "ForEachBatch", Name: "files"}, {Kind: "ForEach"}, {Kind: "Print"}},
	}
	if diff := cmp.Diff(want, p.Shape()); diff != "" {
		t.Errorf("Shape() (-want +got):\n%s", diff)
	}
	// A Describer names itself; Named overrides its name.
	p2, err := stream.NewPipeline(stream.Config{})
	if err != nil {
		t.Fatal(err)
	}
	d := &durable{log: recoverylog.NewMemory()}
	stream.From(p2, newReplay(t, d))
	stream.From(p2, newReplay(t, d), stream.Named("other"))
	want = recovery.Shape{Sources: []recovery.Component{{Kind: "memory", Name: "replay"}, {Kind: "memory", Name: "other"}}}
	if diff := cmp.Diff(want, p2.Shape()); diff != "" {
		t.Errorf("Shape() of Describers (-want +got):\n%s", diff)
	}
}

// TestShapeChecked runs a pipeline once with a log, then restarts pipelines
// on it: the same shape is accepted, any other refused before anything
// starts, with an error naming the difference and the way out.
func TestShapeChecked(t *testing.T) {
	tests := []struct {
		name    string
		source  string
		outputs []string
		want    []string // substrings of the error; none: accepted
	}{
		{"same", "words", []string{"files", "print"}, nil},
		{"output renamed", "words", []string{"other", "print"},
			[]string{`output 1 was ForEachBatch("files"), now ForEachBatch("other")`}},
		{"output added", "words", []string{"files", "print", "each"},
			[]string{"output 3 is new: ForEach"}},
		{"outputs swapped", "words", []string{"print", "files"},
			[]string{`output 1 was ForEachBatch("files"), now Print`, `output 2 was Print, now ForEachBatch("files")`}},
		{"source renamed", "lines", []string{"files", "print"},
			[]string{`source 1 was memory("words"), now memory("lines")`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := recoverylog.NewMemory()
				cfg := stream.Config{Recovery: store}
				p := shapedPipeline(t, cfg, "words", "files", "print")
				p.Drain(context.Background())
				if err := p.Run(t.Context()); err != nil {
					t.Fatalf("first Run: %v", err)
				}
				p = shapedPipeline(t, cfg, tt.source, tt.outputs...)
				p.Drain(context.Background())
				before := len(store.Entries())
				err := p.Run(t.Context())
				if tt.want == nil {
					if err != nil {
						t.Fatalf("Run with the same shape: %v", err)
					}
					return
				}
				if !errors.Is(err, recovery.ErrShapeChanged) {
					t.Fatalf("Run = %v, want an error wrapping recovery.ErrShapeChanged", err)
				}
				for _, w := range append(tt.want, "start fresh") {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not say %q", err, w)
					}
				}
				if after := len(store.Entries()); after != before {
					t.Errorf("a refused Run appended %d entries", after-before)
				}
				// The log is closed again: it can be opened.
				l, err := store.Open(t.Context())
				if err != nil {
					t.Fatalf("log left open: %v", err)
				}
				l.Close()
			})
		})
	}
}

// rtReceiver is a memory source that records the Runtime it was started
// with.
type rtReceiver struct {
	*memory.Source[string]
	mu sync.Mutex
	rt source.Runtime[string]
}

func (r *rtReceiver) Start(ctx context.Context, rt source.Runtime[string]) error {
	r.mu.Lock()
	r.rt = rt
	r.mu.Unlock()
	return r.Source.Start(ctx, rt)
}

// TestResumeAfter checks what receivers learn of the log: nothing without
// one, and the greatest logged sequence number per shard with one.
func TestResumeAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		run := func(cfg stream.Config, push ...string) source.Runtime[string] {
			p, err := stream.NewPipeline(cfg)
			if err != nil {
				t.Fatal(err)
			}
			src, err := memory.New[string](memory.Config{Shards: 2})
			if err != nil {
				t.Fatal(err)
			}
			for _, rec := range push {
				src.Push(rec)
			}
			r := &rtReceiver{Source: src}
			stream.ForEach(stream.From(p, r), func(context.Context, string) error { return nil })
			p.Drain(context.Background())
			if err := p.Run(t.Context()); err != nil {
				t.Fatal(err)
			}
			return r.rt
		}
		if rt := run(stream.Config{}, "a"); rt.ResumeAfter != nil {
			t.Error("without a log: ResumeAfter set")
		}
		store := recoverylog.NewMemory()
		if rt := run(stream.Config{Recovery: store}, "a", "b", "c"); rt.ResumeAfter == nil {
			t.Fatal("first run with a log: ResumeAfter nil")
		} else if seq, ok := rt.ResumeAfter(memory.DefaultName, memory.ShardName(0)); ok {
			t.Errorf("first run: ResumeAfter = %q, want none", seq)
		}
		rt := run(stream.Config{Recovery: store})
		type pos struct {
			Seq string
			OK  bool
		}
		var got []pos
		for _, shard := range []string{memory.ShardName(0), memory.ShardName(1), "nope"} {
			seq, ok := rt.ResumeAfter(memory.DefaultName, shard)
			got = append(got, pos{seq, ok})
		}
		want := []pos{{"2", true}, {"1", true}, {"", false}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("ResumeAfter (-want +got):\n%s", diff)
		}
	})
}

// countingStore counts compactions of a MemoryStore's logs and can make
// them fail.
type countingStore struct {
	*recoverylog.MemoryStore
	mu       sync.Mutex
	compacts int
	fail     error
}

func (s *countingStore) Open(ctx context.Context) (recovery.Log, error) {
	l, err := s.MemoryStore.Open(ctx)
	if err != nil {
		return nil, err
	}
	return &countingLog{Log: l, s: s}, nil
}

type countingLog struct {
	recovery.Log
	s *countingStore
}

func (l *countingLog) Replace(ctx context.Context, records [][]byte) error {
	l.s.mu.Lock()
	l.s.compacts++
	fail := l.s.fail
	l.s.mu.Unlock()
	if fail != nil {
		return fail
	}
	return l.Log.Replace(ctx, records)
}

// TestCompaction checks that the log is compacted every CompactEvery
// completed batches (or reservations of batch times), and that a failed compaction stops the Run without
// failing the batch.
func TestCompaction(t *testing.T) {
	tests := []struct {
		name    string
		every   int
		fail    error
		wantN   int
		wantErr error
	}{
		{"every 3", 3, nil, 3, nil}, // 10 batches
		{"default", 0, nil, 0, nil},
		{"failure stops the run", 2, errCrash, 1, errCrash},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := &countingStore{MemoryStore: recoverylog.NewMemory(), fail: tt.fail}
				rl := recoverycheck.NewRecorder()
				p, err := stream.NewPipeline(stream.Config{Recovery: store, CompactEvery: tt.every, Listeners: []stream.Listener{rl}})
				if err != nil {
					t.Fatal(err)
				}
				src, err := memory.New[string](memory.Config{})
				if err != nil {
					t.Fatal(err)
				}
				stream.ForEach(stream.From(p, src), func(context.Context, string) error { return nil })
				errc := make(chan error, 1)
				go func() { errc <- p.Run(t.Context()) }()
				// A record in every batch: empty batches of a stateless
				// pipeline are not logged, and do not count.
				time.Sleep(500 * time.Millisecond)
				for range 10 {
					src.Push("r") // refused once a failure stopped the Run
					time.Sleep(time.Second)
				}
				p.Stop()
				err = <-errc
				if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
					t.Errorf("Run = %v, want %v", err, tt.wantErr)
				}
				if store.compacts != tt.wantN {
					t.Errorf("%d compactions, want %d", store.compacts, tt.wantN)
				}
				if tt.fail != nil && len(rl.Completed()) != 2 {
					t.Errorf("%d batches completed, want 2 (the one whose compaction failed included)", len(rl.Completed()))
				}
				if _, err := recoverylog.Recover(store.Entries()); err != nil {
					t.Errorf("Recover: %v", err)
				}
			})
		})
	}
}

// TestOpenFails checks that Run reports a log it cannot open.
func TestOpenFails(t *testing.T) {
	store := recoverylog.NewMemory()
	l, err := store.Open(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p := shapedPipeline(t, stream.Config{Recovery: store}, "", "print")
	if err := p.Run(t.Context()); !errors.Is(err, recovery.ErrLocked) {
		t.Errorf("Run = %v, want an error wrapping recovery.ErrLocked", err)
	}
}

// TestBatchTimesContinueAfterLog checks that a restart whose clock is
// behind the last logged batch time (a clock step back, another machine)
// cuts its first batch after that time, never at a logged time again.
func TestBatchTimesContinueAfterLog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := recoverylog.NewMemory()
		ahead := batch.TimeOf(time.Now().Add(time.Hour))
		ahead -= ahead % 1000
		p := shapedPipeline(t, stream.Config{Recovery: store}, "", "files")
		l, err := recoverylog.Open(t.Context(), store, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Append(t.Context(), recoverylog.ShapeRecorded(p.Shape()),
			recoverylog.BatchAllocated(ahead), recoverylog.BatchCompleted(ahead)); err != nil {
			t.Fatal(err)
		}
		l.Close()
		rl := recoverycheck.NewRecorder()
		p, err = stream.NewPipeline(stream.Config{Recovery: store, Listeners: []stream.Listener{rl}})
		if err != nil {
			t.Fatal(err)
		}
		src, err := memory.New[string](memory.Config{})
		if err != nil {
			t.Fatal(err)
		}
		src.Push("x")
		stream.ForEachBatch(stream.From(p, src), func(context.Context, *batch.Batch[string]) error { return nil }, stream.Named("files"))
		p.Drain(context.Background())
		if err := p.Run(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got := rl.Completed(); len(got) != 1 || got[0] != ahead+1000 {
			t.Errorf("batches %v, want one at %v, after the logged %v", got, ahead+1000, ahead)
		}
	})
}
