package panics_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/weirstream/weir/internal/panics"
)

func explode() error { panic("boom") }

func TestCall(t *testing.T) {
	want := errors.New("plain")
	if err := panics.Call(func() error { return want }); err != want {
		t.Errorf("Call of a function returning %v = %v", want, err)
	}
	err := panics.Call(explode)
	pe, ok := errors.AsType[*panics.Error](err)
	if !ok {
		t.Fatalf("Call of a panicking function = %v (%T), want a *panics.Error", err, err)
	}
	if pe.Value != "boom" || pe.Error() != "panic: boom" {
		t.Errorf("Value %v, Error %q; want boom, %q", pe.Value, pe.Error(), "panic: boom")
	}
	if !strings.HasPrefix(pe.Site, "github.com/weirstream/weir/internal/panics_test.explode (panics_test.go:") {
		t.Errorf("Site = %q, want explode's line", pe.Site)
	}
	if !strings.Contains(string(pe.Stack), "panics_test.explode") {
		t.Errorf("Stack does not name explode:\n%s", pe.Stack)
	}
}

func TestCall1(t *testing.T) {
	if v, err := panics.Call1(func() (int, error) { return 7, nil }); v != 7 || err != nil {
		t.Errorf("Call1 = %v, %v; want 7, nil", v, err)
	}
	v, err := panics.Call1(func() (int, error) { return 7, explode() })
	if _, ok := errors.AsType[*panics.Error](err); !ok || v != 0 {
		t.Errorf("Call1 of a panicking function = %v, %v; want 0 and a *panics.Error", v, err)
	}
}
