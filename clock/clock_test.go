package clock

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestManualTimer(t *testing.T) {
	m := NewManual(epoch)
	tm := m.NewTimer(10 * time.Second)
	m.Advance(9 * time.Second)
	select {
	case <-tm.C():
		t.Fatal("timer fired early")
	default:
	}
	m.Advance(time.Second)
	select {
	case got := <-tm.C():
		if !got.Equal(epoch.Add(10 * time.Second)) {
			t.Errorf("fired at %v", got)
		}
	default:
		t.Fatal("timer did not fire at its deadline")
	}
	if tm.Stop() {
		t.Error("Stop of a fired timer reported active")
	}
	tm.Reset(time.Second)
	if m.Waiters() != 1 {
		t.Errorf("Waiters() = %d after Reset, want 1", m.Waiters())
	}
	if !tm.Stop() {
		t.Error("Stop of a reset timer reported inactive")
	}
	m.Advance(time.Hour)
	select {
	case <-tm.C():
		t.Fatal("stopped timer fired")
	default:
	}
}

func TestManualTicker(t *testing.T) {
	m := NewManual(epoch)
	tk := m.NewTicker(time.Second)
	var got []time.Duration
	for i := 0; i < 3; i++ {
		m.Advance(time.Second)
		got = append(got, (<-tk.C()).Sub(epoch))
	}
	want := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("ticks at %v, want %v", got, want)
		}
	}
	// A slow receiver misses ticks instead of queueing them.
	m.Advance(5 * time.Second)
	<-tk.C()
	select {
	case <-tk.C():
		t.Fatal("ticker queued more than one tick")
	default:
	}
	if m.Now() != epoch.Add(8*time.Second) {
		t.Errorf("Now() = %v", m.Now())
	}
	tk.Stop()
	if m.Waiters() != 0 {
		t.Errorf("Waiters() = %d after Stop", m.Waiters())
	}
}

func TestSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if err := Sleep(context.Background(), Real{}, time.Minute); err != nil {
			t.Fatal(err)
		}
		if got := time.Since(start); got != time.Minute {
			t.Errorf("slept %v", got)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := Sleep(ctx, Real{}, time.Minute); !errors.Is(err, context.Canceled) {
			t.Errorf("Sleep on a cancelled ctx = %v", err)
		}
		if Or(nil) != (Real{}) {
			t.Error("Or(nil) is not Real")
		}
	})
}
