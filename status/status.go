package status

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/weirstream/weir/metrics"
)

// ErrInvalidConfig is wrapped by the error New returns for a bad Config.
var ErrInvalidConfig = errors.New("status: invalid config")

// DefaultRefresh is the default of Config.Refresh.
const DefaultRefresh = 2 * time.Second

// Config configures a Handler.
type Config struct {
	// Collector is where the numbers come from. Required.
	Collector *metrics.Collector
	// Title heads the page, e.g. the application name. Default "weir".
	Title string
	// Refresh is how often the page reloads itself, a whole number of
	// seconds; negative: never. Default DefaultRefresh (2s).
	Refresh time.Duration
	// Logger receives the errors of writing a page. Default: slog.Default().
	Logger *slog.Logger
	// Hosts are the host names, besides localhost and IP addresses, that
	// a request's Host header may name: the names this server is reached
	// by when it is served beyond loopback, e.g. "status.internal". A
	// request naming any other host is refused with 421 Misdirected
	// Request. This defeats DNS rebinding, where a page of another site
	// points its own name at this server to read it from a visitor's
	// browser. Default: none.
	Hosts []string
}

// Handler serves the status page: at any path but one ending in
// "snapshot.json", which serves the metrics.Snapshot as JSON, its field
// names as in Go and its durations in seconds (a number). Mount it
// anywhere (http.StripPrefix is not needed). It only reads, so it answers
// GET and HEAD; it is safe for concurrent use.
//
// It answers only requests whose Host header names localhost, an IP
// address or one of Config.Hosts, and every response forbids framing and
// content sniffing. It has no authentication and no TLS: whoever reaches it
// reads the page, the snapshot and whatever Guard protects.
type Handler struct {
	cfg  Config
	page *template.Template
}

//go:embed page.html.tmpl
var files embed.FS

// New validates cfg and returns a Handler.
func New(cfg Config) (*Handler, error) {
	var problems []error
	if cfg.Collector == nil {
		problems = append(problems, errors.New("Collector nil: pass the metrics.Collector listening to the pipeline"))
	}
	if cfg.Refresh > 0 && cfg.Refresh%time.Second != 0 {
		problems = append(problems, fmt.Errorf("Refresh %v: must be a whole number of seconds, such as %v", cfg.Refresh, cfg.Refresh.Round(time.Second)+time.Second))
	}
	for i, host := range cfg.Hosts {
		if host == "" || strings.ContainsAny(host, ":/[]* \t") {
			problems = append(problems, fmt.Errorf("Hosts[%d] %q: must be a host name without port or wildcard, such as status.internal", i, host))
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(problems...))
	}
	if cfg.Title == "" {
		cfg.Title = "weir"
	}
	if cfg.Refresh == 0 {
		cfg.Refresh = DefaultRefresh
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	page, err := template.ParseFS(files, "page.html.tmpl")
	if err != nil {
		return nil, fmt.Errorf("status: parsing the page template: %w", err)
	}
	cfg.Hosts = slices.Clone(cfg.Hosts)
	return &Handler{cfg: cfg, page: page}, nil
}

// Guard returns next behind the page's protections: it answers only
// requests whose Host header the page would answer, and its responses carry
// the same headers against framing and sniffing. Use it for what is served
// beside the page, such as Prometheus metrics.
func (h *Handler) Guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.admit(w, r) {
			next.ServeHTTP(w, r)
		}
	})
}

// admit sets the headers of every response and reports whether r names a
// host this server answers for; if not, it has answered 421.
func (h *Handler) admit(w http.ResponseWriter, r *http.Request) bool {
	hdr := w.Header()
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("X-Frame-Options", "DENY")
	hdr.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
	hdr.Set("Referrer-Policy", "no-referrer")
	if h.allowedHost(r.Host) {
		return true
	}
	h.cfg.Logger.Debug("status: refused a request for another host", "host", r.Host, "remote", r.RemoteAddr)
	http.Error(w, "status: the Host header names a host this server does not answer for; "+
		"if it is this server's name, add it to status.Config.Hosts", http.StatusMisdirectedRequest)
	return false
}

// allowedHost reports whether the Host header hostport names localhost, an
// IP address or one of cfg.Hosts. A browser sends the host of the address
// it was given, so a page of another site that rebinds its own name to this
// server's address still sends its own name, which is refused. An empty
// Host (HTTP/1.0, not a browser) is allowed.
func (h *Handler) allowedHost(hostport string) bool {
	if hostport == "" {
		return true
	}
	host := hostport
	if name, _, err := net.SplitHostPort(hostport); err == nil {
		host = name
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if _, err := netip.ParseAddr(host); err == nil || strings.EqualFold(host, "localhost") {
		return true
	}
	return slices.ContainsFunc(h.cfg.Hosts, func(name string) bool {
		return strings.EqualFold(strings.TrimSuffix(name, "."), host)
	})
}

// ServeHTTP serves the page or the JSON snapshot.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.admit(w, r) {
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "status: only GET and HEAD", http.StatusMethodNotAllowed)
		return
	}
	snap := h.cfg.Collector.Snapshot()
	w.Header().Set("Cache-Control", "no-store")
	if strings.HasSuffix(r.URL.Path, "snapshot.json") {
		b, err := snapshotJSON(snap)
		if err != nil {
			h.cfg.Logger.Error("status: encoding the snapshot", "err", err)
			http.Error(w, "status: encoding the snapshot failed; see the logs", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if _, err := w.Write(b); err != nil {
			h.cfg.Logger.Debug("status: writing the snapshot", "err", err)
		}
		return
	}
	var buf bytes.Buffer
	if err := h.page.Execute(&buf, newView(h.cfg, snap)); err != nil {
		h.cfg.Logger.Error("status: rendering the page", "err", err)
		http.Error(w, "status: rendering the page failed; see the logs", http.StatusInternalServerError)
		return
	}
	// Nothing may load from elsewhere: the page is self-contained.
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-ancestors 'none'")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if _, err := w.Write(buf.Bytes()); err != nil {
		h.cfg.Logger.Debug("status: writing the page", "err", err)
	}
}
