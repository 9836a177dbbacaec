package faults_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/localaws/faults"
)

// quiet is how long a test listens for an answer that must not come. It
// can only let a broken proxy pass unnoticed, never fail a good one.
const quiet = 200 * time.Millisecond

// proxied starts an HTTP server answering "ok" and a proxy in front of it;
// calls counts the requests the server got.
func proxied(t *testing.T) (p *faults.Proxy, calls *atomic.Int64) {
	t.Helper()
	calls = new(atomic.Int64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	p, err := faults.NewProxy(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p, calls
}

// get sends one GET on the raw connection c and reads the answer's body.
func get(c net.Conn) (string, error) {
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// mustGet fails t unless a GET on c answers "ok"; when names the moment.
func mustGet(t *testing.T, c net.Conn, when string) {
	t.Helper()
	if body, err := get(c); err != nil || body != "ok" {
		t.Fatalf("%s: %q, %v; want \"ok\"", when, body, err)
	}
}

func dial(t *testing.T, p *faults.Proxy) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestProxyPass(t *testing.T) {
	p, calls := proxied(t)
	resp, err := http.Get(p.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "ok" || calls.Load() != 1 {
		t.Errorf("through the proxy: body %q, %d server calls; want \"ok\", 1", b, calls.Load())
	}
}

// TestProxyRefuse checks that Refuse cuts an open connection at once and
// resets new ones, which never reach the server, and that Pass serves again.
func TestProxyRefuse(t *testing.T) {
	p, calls := proxied(t)
	open := dial(t, p)
	mustGet(t, open, "before Refuse")
	p.Set(faults.Refuse)
	if _, err := open.Read(make([]byte, 1)); err == nil {
		t.Error("an open connection was not cut by Refuse")
	}
	// The reset may come before the client's connect returns: a dial
	// that fails is refused too.
	if c, err := net.Dial("tcp", p.Addr()); err == nil {
		_, err = get(c)
		c.Close()
		if err == nil {
			t.Error("a new connection got an answer in Refuse mode")
		}
	}
	if calls.Load() != 1 {
		t.Errorf("the server got %d calls, want 1: a request passed during Refuse", calls.Load())
	}
	p.Set(faults.Pass)
	mustGet(t, dial(t, p), "after Refuse, Pass")
	if st := p.Stats(); st.Cut != 1 || st.Refused != 1 || st.Accepted != 3 {
		t.Errorf("stats %+v, want 3 accepted, 1 refused, 1 cut", st)
	}
}

// TestProxyBlackhole checks that Blackhole holds a new connection's
// request and an open connection's next one, unanswered, and that Pass
// lets both through: held, not lost.
func TestProxyBlackhole(t *testing.T) {
	p, calls := proxied(t)
	open := dial(t, p)
	mustGet(t, open, "before Blackhole")
	p.Set(faults.Blackhole)
	fresh := dial(t, p) // accepted: a partition does not refuse
	results := make(chan error, 2)
	for _, c := range []net.Conn{open, fresh} {
		go func() {
			body, err := get(c)
			if err == nil && body != "ok" {
				err = errors.New("body " + body)
			}
			results <- err
		}()
	}
	select {
	case err := <-results:
		t.Fatalf("a request got an answer during Blackhole (%v)", err)
	case <-time.After(quiet):
	}
	if calls.Load() != 1 {
		t.Fatalf("the server got %d calls during Blackhole, want 1 (before it)", calls.Load())
	}
	p.Set(faults.Pass)
	for range 2 {
		if err := <-results; err != nil {
			t.Errorf("a request held by Blackhole, after Pass: %v", err)
		}
	}
}

// TestProxyBlackholeThenRefuse checks that Refuse cuts what Blackhole held.
func TestProxyBlackholeThenRefuse(t *testing.T) {
	p, calls := proxied(t)
	p.Set(faults.Blackhole)
	c := dial(t, p)
	errc := make(chan error, 1)
	go func() { _, err := get(c); errc <- err }()
	p.Set(faults.Refuse)
	if err := <-errc; err == nil {
		t.Error("a request held by Blackhole got an answer after Refuse")
	}
	if calls.Load() != 0 {
		t.Errorf("the server got %d calls, want 0", calls.Load())
	}
}

// TestProxyClose checks that Close cuts open connections, stops accepting,
// and is idempotent.
func TestProxyClose(t *testing.T) {
	p, _ := proxied(t)
	open := dial(t, p)
	mustGet(t, open, "before Close")
	p.Set(faults.Blackhole)
	held := dial(t, p)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []net.Conn{open, held} {
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Error("a connection outlived Close")
		}
	}
	if c, err := net.Dial("tcp", p.Addr()); err == nil {
		c.Close()
		t.Error("the proxy accepts connections after Close")
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestNewProxyRejectsRemoteTargets(t *testing.T) {
	for _, target := range []string{"example.com:80", "10.0.0.1:443", "127.0.0.1", ""} {
		_, err := faults.NewProxy(target)
		if !errors.Is(err, faults.ErrInvalidConfig) || !strings.Contains(err.Error(), "proxy target") {
			t.Errorf("NewProxy(%q) = %v, want an ErrInvalidConfig naming the target", target, err)
		}
	}
}

func TestModeString(t *testing.T) {
	for m, want := range map[faults.Mode]string{faults.Pass: "Pass", faults.Refuse: "Refuse", faults.Blackhole: "Blackhole", 7: "Mode(7)"} {
		if got := m.String(); got != want {
			t.Errorf("Mode(%d).String() = %q, want %q", int(m), got, want)
		}
	}
}
