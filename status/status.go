package status

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
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
	// Logger receives the errors of writing a page. Default: discard.
	Logger *slog.Logger
}

// Handler serves the status page: at any path but one ending in
// "snapshot.json", which serves the metrics.Snapshot as JSON. Mount it
// anywhere (http.StripPrefix is not needed). It only reads, so it answers
// GET and HEAD; it is safe for concurrent use.
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
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	page, err := template.ParseFS(files, "page.html.tmpl")
	if err != nil {
		return nil, fmt.Errorf("status: parsing the page template: %w", err)
	}
	return &Handler{cfg: cfg, page: page}, nil
}

// ServeHTTP serves the page or the JSON snapshot.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "status: only GET and HEAD", http.StatusMethodNotAllowed)
		return
	}
	snap := h.cfg.Collector.Snapshot()
	w.Header().Set("Cache-Control", "no-store")
	if strings.HasSuffix(r.URL.Path, "snapshot.json") {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(snap); err != nil {
			h.cfg.Logger.Warn("status: writing the snapshot", "err", err)
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
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if _, err := w.Write(buf.Bytes()); err != nil {
		h.cfg.Logger.Debug("status: writing the page", "err", err)
	}
}
