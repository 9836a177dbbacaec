package recoverylog_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/internal/recoverylog/logtest"
	"github.com/weirstream/weir/recovery"
	"github.com/weirstream/weir/recovery/recoverytest"
)

func TestMemoryConformance(t *testing.T) {
	recoverytest.Run(t, func(*testing.T) recovery.Opener { return recoverylog.NewMemory() })
}

func TestMemoryLocked(t *testing.T) {
	m := recoverylog.NewMemory()
	l, err := m.Open(t.Context())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if _, err := m.Open(t.Context()); !errors.Is(err, recovery.ErrLocked) {
		t.Fatalf("second Open: got %v, want ErrLocked", err)
	}
	l.Close()
	l, err = m.Open(t.Context())
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	l.Close()
}

func TestMemoryFaults(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name  string
		setup func(m *recoverylog.MemoryStore)
		want  []recoverylog.Entry // after appending block(0,0), then block(0,1)+block(0,2), then block(0,3)
	}{
		{
			name:  "fail next append",
			setup: func(m *recoverylog.MemoryStore) { m.FailNextAppend(boom) },
			want:  []recoverylog.Entry{block(0, 1), block(0, 2), block(0, 3)},
		},
		{
			name: "second append keeps a prefix",
			setup: func(m *recoverylog.MemoryStore) {
				m.SetAppendHook(func(n int, entries []recoverylog.Entry) recoverylog.Fault {
					if n == 2 {
						return recoverylog.Fault{Err: boom, Keep: 1}
					}
					return recoverylog.Fault{}
				})
			},
			want: []recoverylog.Entry{block(0, 0), block(0, 1), block(0, 3)},
		},
		{
			name: "append takes effect but fails",
			setup: func(m *recoverylog.MemoryStore) {
				m.SetAppendHook(func(n int, entries []recoverylog.Entry) recoverylog.Fault {
					return recoverylog.Fault{Err: boom, Keep: len(entries)}
				})
			},
			want: []recoverylog.Entry{block(0, 0), block(0, 1), block(0, 2), block(0, 3)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := recoverylog.NewMemory()
			tt.setup(m)
			l, err := recoverylog.Open(t.Context(), m, nil)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer l.Close()
			var failed int
			for _, es := range [][]recoverylog.Entry{{block(0, 0)}, {block(0, 1), block(0, 2)}, {block(0, 3)}} {
				if err := l.Append(t.Context(), es...); errors.Is(err, boom) {
					failed++
				} else if err != nil {
					t.Fatalf("Append: %v", err)
				}
			}
			if failed == 0 {
				t.Fatalf("no append failed")
			}
			logtest.Check(t, l, tt.want)
			if diff := cmp.Diff(tt.want, m.Entries(), logtest.EquateEmpty()); diff != "" {
				t.Fatalf("Entries mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
