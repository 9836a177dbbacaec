package outputid_test

import (
	"context"
	"strings"
	"testing"

	"github.com/weirstream/weir/internal/outputid"
	"github.com/weirstream/weir/internal/runname"
)

// A context carries the index With gave it, a child too, and a context
// that was given none carries none.
func TestWith(t *testing.T) {
	if i, ok := outputid.Of(context.Background()); ok {
		t.Errorf("Of(Background) = %d, true; want none", i)
	}
	ctx, cancel := context.WithCancel(outputid.With(context.Background(), 3))
	defer cancel()
	if i, ok := outputid.Of(ctx); !ok || i != 3 {
		t.Errorf("Of(a child of With(3)) = %d, %v; want 3, true", i, ok)
	}
}

// InRun finds a Run's name and an output index only in the context of a
// Run's output.
func TestInRun(t *testing.T) {
	run := runname.With(context.Background())
	for _, c := range []struct {
		name string
		ctx  context.Context
		want bool
	}{
		{"a Run's output", outputid.With(run, 2), true},
		{"a Run's, no output", run, false},
		{"an output, no Run", outputid.With(context.Background(), 2), false},
	} {
		name, out, ok := outputid.InRun(c.ctx)
		if ok != c.want || ok && (name != runname.Of(run) || out != 2) {
			t.Errorf("%s: InRun = %q, %d, %v; want ok %v", c.name, name, out, ok, c.want)
		}
	}
}

// An Owner is claimed by the first output of a Run; a second output of
// that Run clashes; a new Run takes it over, unless the claim is exclusive
// and the first Run still runs; a context of no output claims nothing.
func TestOwnerClaim(t *testing.T) {
	runA, endA := context.WithCancel(runname.With(context.Background()))
	defer endA()
	runB := runname.With(context.Background())
	var o outputid.Owner
	steps := []struct {
		name      string
		ctx       context.Context
		exclusive bool
		want      outputid.Clash
		first     int
	}{
		{"first output of run A", outputid.With(runA, 1), true, outputid.None, 0},
		{"same output again", outputid.With(runA, 1), true, outputid.None, 0},
		{"second output of run A", outputid.With(runA, 2), false, outputid.OtherOutput, 1},
		{"not an output's context", context.Background(), true, outputid.None, 0},
		{"run B while A runs, exclusive", outputid.With(runB, 2), true, outputid.OtherRun, 1},
		{"run B while A runs, not exclusive", outputid.With(runB, 2), false, outputid.None, 0},
		{"run A's other output, now B's", outputid.With(runA, 1), false, outputid.None, 0},
	}
	for _, s := range steps {
		if got, first := o.Claim(s.ctx, s.exclusive); got != s.want || first != s.first {
			t.Errorf("%s: Claim = %v, %d; want %v, %d", s.name, got, first, s.want, s.first)
		}
	}
	endA()
	if got, _ := o.Claim(outputid.With(runB, 3), true); got != outputid.None {
		t.Errorf("run B, exclusive, once A ended: Claim = %v; want None", got)
	}
}

func TestWrittenClaim(t *testing.T) {
	runA, runB := runname.With(context.Background()), runname.With(context.Background())
	w := outputid.Written[string, string]{Key: strings.ToLower}
	steps := []struct {
		name       string
		ctx        context.Context
		t          int64
		elems      []string
		found      bool
		first, out int
		clash      string
	}{
		{"output 0 writes a and b", outputid.With(runA, 0), 1, []string{"a", "b"}, false, 0, 0, ""},
		{"output 0 again", outputid.With(runA, 0), 1, []string{"c"}, false, 0, 0, ""},
		{"output 1 writes its own", outputid.With(runA, 1), 1, []string{"d"}, false, 0, 0, ""},
		{"output 1 writes output 0's key", outputid.With(runA, 1), 1, []string{"e", "A"}, true, 0, 1, "A"},
		{"output 2 writes output 1's key", outputid.With(runA, 2), 1, []string{"d"}, true, 1, 2, "d"},
		{"the refused write recorded nothing", outputid.With(runA, 2), 1, []string{"e"}, false, 0, 0, ""},
		{"not an output's context", runA, 1, []string{"a"}, false, 0, 0, ""},
		{"the next batch starts afresh", outputid.With(runA, 1), 2, []string{"a"}, false, 0, 0, ""},
		{"output 0 in it meets output 1", outputid.With(runA, 0), 2, []string{"a"}, true, 1, 0, "a"},
		{"another Run starts afresh", outputid.With(runB, 0), 2, []string{"a"}, false, 0, 0, ""},
	}
	for _, s := range steps {
		first, out, clash, found := w.Claim(s.ctx, s.t, s.elems)
		if found != s.found || first != s.first || out != s.out || clash != s.clash {
			t.Errorf("%s: Claim = %d, %d, %q, %v; want %d, %d, %q, %v", s.name, first, out, clash, found, s.first, s.out, s.clash, s.found)
		}
	}
}
