package faults

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// Mode is what a Proxy does with its connections.
type Mode int32

// The modes of a Proxy.
const (
	// Pass forwards every connection to the server: no fault.
	Pass Mode = iota
	// Refuse is a server that went down: the proxy resets every new
	// connection as soon as it is accepted, and cuts (resets) every open
	// one when the mode is set. Clients see "connection reset by peer".
	Refuse
	// Blackhole is a network partition: the proxy accepts new connections
	// but neither dials the server nor reads their requests, and holds
	// every open connection silent (bytes in flight wait, in neither
	// direction). Clients see nothing until their own timeouts. When the
	// mode goes back to Pass, what was held flows on, as it would once a
	// partition heals within TCP's retransmission time: even the request
	// of a client that gave up or died meanwhile reaches the server late.
	// Set Refuse first to cut it instead.
	Blackhole
)

// String names the mode, as in the constants above.
func (m Mode) String() string {
	switch m {
	case Pass:
		return "Pass"
	case Refuse:
		return "Refuse"
	case Blackhole:
		return "Blackhole"
	}
	return fmt.Sprintf("Mode(%d)", int32(m))
}

// Proxy is a TCP proxy on 127.0.0.1 in front of one loopback server, to
// take the server away from its clients (Refuse, Blackhole) and give it
// back (Pass), which no local AWS server can do itself. Give clients
// Endpoint instead of the server's. Its methods are safe for concurrent
// use; Close stops it.
type Proxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup // serve and every link's goroutines

	mu     sync.Mutex
	mode   Mode
	wake   chan struct{} // closed and replaced at every mode change, and at Close
	links  map[*link]struct{}
	closed bool

	accepted, refused, cut atomic.Int64
}

// link is one client connection and, once dialled, its server connection.
type link struct {
	client net.Conn

	mu     sync.Mutex
	server net.Conn // nil until dialled
	dead   bool     // reset: a server dialled after is reset at once
}

// NewProxy starts a proxy in Pass mode on a free port of 127.0.0.1 that
// forwards to target, a "host:port" whose host is a loopback address or
// localhost (a proxy never sends traffic off the machine). Close it when
// done.
func NewProxy(target string) (*Proxy, error) {
	host, _, err := net.SplitHostPort(target)
	if err != nil {
		return nil, fmt.Errorf("%w: proxy target %q: want host:port: %w", ErrInvalidConfig, target, err)
	}
	if ip := net.ParseIP(host); !strings.EqualFold(host, "localhost") && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("%w: proxy target %q: host must be 127.0.0.1, ::1 or localhost", ErrInvalidConfig, target)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faults: proxy: %w", err)
	}
	p := &Proxy{ln: ln, target: target, wake: make(chan struct{}), links: map[*link]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Addr returns the proxy's "127.0.0.1:port".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Endpoint returns the proxy's address as an HTTP endpoint URL
// ("http://127.0.0.1:port"), for an SDK client's BaseEndpoint.
func (p *Proxy) Endpoint() string { return "http://" + p.Addr() }

// Mode returns the current mode.
func (p *Proxy) Mode() Mode {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode
}

// Set switches the proxy to mode m. Setting Refuse cuts every open
// connection before Set returns; setting Pass releases what Blackhole held.
func (p *Proxy) Set(m Mode) {
	p.mu.Lock()
	if p.closed || m == p.mode {
		p.mu.Unlock()
		return
	}
	p.mode = m
	close(p.wake)
	p.wake = make(chan struct{})
	var cut []*link
	if m == Refuse {
		cut = p.linkList()
	}
	p.mu.Unlock()
	for _, l := range cut {
		p.cut.Add(1)
		l.reset()
	}
}

// ProxyStats counts a Proxy's connections.
type ProxyStats struct {
	Accepted int64 // client connections accepted, in any mode
	Refused  int64 // reset on arrival in Refuse mode
	Cut      int64 // open when Refuse was set, and reset
}

// Stats returns the connection counts so far.
func (p *Proxy) Stats() ProxyStats {
	return ProxyStats{Accepted: p.accepted.Load(), Refused: p.refused.Load(), Cut: p.cut.Load()}
}

// Close stops accepting, resets every connection and waits for the
// proxy's goroutines to end. It is idempotent.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.wake)
	links := p.linkList()
	p.mu.Unlock()
	err := p.ln.Close()
	for _, l := range links {
		l.reset()
	}
	p.wg.Wait()
	return err
}

// linkList returns the open links; p.mu is held.
func (p *Proxy) linkList() []*link {
	out := make([]*link, 0, len(p.links))
	for l := range p.links {
		out = append(out, l)
	}
	return out
}

// serve accepts connections until the listener is closed.
func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed: Close resets the links
		}
		p.accepted.Add(1)
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.handle(c)
		}()
	}
}

// handle runs one client connection: held while the proxy is in
// Blackhole, reset in Refuse, else forwarded both ways until either side
// ends it.
func (p *Proxy) handle(c net.Conn) {
	l := &link{client: c}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		resetConn(c)
		return
	}
	p.links[l] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.links, l)
		p.mu.Unlock()
		l.reset()
	}()
	if !p.gate() {
		p.refused.Add(1)
		return
	}
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		return // the server is gone: the client sees its connection reset
	}
	if !l.attach(s) { // cut while dialling
		resetConn(s)
		return
	}
	errc := make(chan error, 2)
	go func() { errc <- p.pipe(s, c) }()
	go func() { errc <- p.pipe(c, s) }()
	// A direction that ended cleanly half-closed its destination; the
	// other may still carry an answer. An error ends both (the deferred
	// reset unblocks the other pipe).
	if err := <-errc; err != nil {
		l.reset()
	}
	<-errc
}

// gate returns true at once in Pass mode, waits while the proxy is in
// Blackhole, and returns false in Refuse mode or once the proxy is closed.
func (p *Proxy) gate() bool {
	for {
		p.mu.Lock()
		m, wake, closed := p.mode, p.wake, p.closed
		p.mu.Unlock()
		switch {
		case closed || m == Refuse:
			return false
		case m == Pass:
			return true
		}
		<-wake
	}
}

// errGateShut ends a pipe whose link the proxy refused or closed.
var errGateShut = errors.New("faults: proxy refused or closed the connection")

// pipe copies src to dst, each chunk (and the end of src) only once the
// gate is open: what src sends during a Blackhole waits. At src's end it
// half-closes dst and returns nil.
func (p *Proxy) pipe(dst, src net.Conn) error {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 || err != nil {
			if !p.gate() {
				return errGateShut
			}
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		if errors.Is(err, io.EOF) {
			if cw, ok := dst.(interface{ CloseWrite() error }); ok {
				return cw.CloseWrite()
			}
			return dst.Close()
		}
		if err != nil {
			return err
		}
	}
}

// attach sets l's server connection, unless l was reset.
func (l *link) attach(s net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dead {
		return false
	}
	l.server = s
	return true
}

// reset resets both connections of l.
func (l *link) reset() {
	l.mu.Lock()
	l.dead = true
	s := l.server
	l.mu.Unlock()
	resetConn(l.client)
	if s != nil {
		resetConn(s)
	}
}

// resetConn closes c with a TCP reset (linger 0), as a crashed server's
// kernel would answer, so the peer sees ECONNRESET rather than a clean end.
func resetConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// Silent returns the endpoint ("http://127.0.0.1:port") of a server that
// accepts every connection and never answers: a Proxy in Blackhole mode,
// which never dials its target. It is closed at the end of the test.
func Silent(tb testing.TB) string {
	tb.Helper()
	p, err := NewProxy("127.0.0.1:1")
	if err != nil {
		tb.Fatal(err)
	}
	p.Set(Blackhole)
	tb.Cleanup(func() { p.Close() })
	return p.Endpoint()
}
