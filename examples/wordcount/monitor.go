package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/metrics"
	"github.com/weirstream/weir/metrics/kinesismetrics"
	weirprom "github.com/weirstream/weir/metrics/prometheus"
	"github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/status"
	"github.com/weirstream/weir/stream"
)

// monitorOptions are the settings of the status page and /metrics.
type monitorOptions struct {
	addr   string // -http: where to serve them; "" serves nothing
	public bool   // -http-public: allow an address other than loopback
	hosts  string // -http-hosts: more names the Host header may carry, comma-separated
}

// exposed says what -http serves to whoever reaches it.
const exposed = "the status page (stream, shard and worker names, checkpoint positions, " +
	"the error texts of failed batches), /snapshot.json (the same as JSON) and /metrics, " +
	"with no authentication and no TLS"

// register adds the monitor's flags to fs.
func (m *monitorOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&m.addr, "http", "", "serve the status page on / and Prometheus metrics on /metrics at this address, e.g. 127.0.0.1:8080 (loopback only unless -http-public)")
	fs.BoolVar(&m.public, "http-public", false, "allow -http on an address other than loopback, serving to whoever reaches it "+exposed)
	fs.StringVar(&m.hosts, "http-hosts", "", "comma-separated host names the status page answers to besides localhost, IP addresses and -http's host, "+
		"e.g. the machine's DNS name with -http-public; a request naming another host is refused (against DNS rebinding)")
}

// hostNames returns the names of -http-hosts and -http's host when it is a
// name: the status page's Config.Hosts.
func (m *monitorOptions) hostNames() []string {
	var names []string
	if host, _, err := net.SplitHostPort(m.addr); err == nil && host != "" && net.ParseIP(host) == nil {
		names = append(names, host)
	}
	for name := range strings.SplitSeq(m.hosts, ",") {
		if name = strings.TrimSpace(name); name != "" {
			names = append(names, name)
		}
	}
	return names
}

// loopback reports whether host is localhost or a loopback IP address.
func loopback(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}

// checkAddr refuses an address that is not loopback unless public is set:
// "host:port" with host 127.0.0.1, ::1 or localhost.
func (m *monitorOptions) checkAddr() error {
	host, _, err := net.SplitHostPort(m.addr)
	if err != nil {
		return fmt.Errorf("-http %q: %w (want host:port, e.g. 127.0.0.1:8080)", m.addr, err)
	}
	if m.public {
		return nil
	}
	if !loopback(host) {
		return fmt.Errorf("-http %q: not a loopback address; use 127.0.0.1:PORT, or add -http-public to serve the status page to the network", m.addr)
	}
	return nil
}

// monitor serves the status page and /metrics of one pipeline run. A nil
// *monitor (no -http) does nothing.
type monitor struct {
	collector *metrics.Collector
	srv       *http.Server
	cancel    context.CancelFunc
	wg        sync.WaitGroup
}

// startMonitor starts serving the status page and /metrics on o.monitor.addr,
// with the numbers of the pipeline the Collector it returns listens to
// (monitor.listeners), of receivers and, if leases is not nil, of the lease
// table it names. It returns nil, nil without -http. Call stop when done.
func startMonitor(ctx context.Context, o options, logger *slog.Logger, out io.Writer, leases *leasetable.Config, receivers ...*kinesis.Receiver) (*monitor, error) {
	if o.monitor.addr == "" {
		return nil, nil
	}
	if err := o.monitor.checkAddr(); err != nil {
		return nil, err
	}
	cfg := metrics.Config{BatchInterval: o.batch, Logger: logger}
	for _, r := range receivers {
		cfg.Receivers = append(cfg.Receivers, kinesismetrics.Receiver(r))
	}
	if leases != nil {
		l, err := kinesismetrics.Leases(ctx, *leases)
		if err != nil {
			return nil, err
		}
		cfg.Leases = l
	}
	if cfg.BatchInterval <= 0 {
		cfg.BatchInterval = stream.DefaultBatchInterval
	}
	c, err := metrics.New(cfg)
	if err != nil {
		return nil, err
	}
	page, err := status.New(status.Config{Collector: c, Title: o.app, Hosts: o.monitor.hostNames()})
	if err != nil {
		return nil, fmt.Errorf("-http-hosts %q: %w", o.monitor.hosts, err)
	}
	// The Go runtime's and the process's standard metrics (go_*,
	// process_*), beside the pipeline's.
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := reg.Register(weirprom.New(c)); err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", page.Guard(promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))
	mux.Handle("/", page)
	ln, err := net.Listen("tcp", o.monitor.addr)
	if err != nil {
		return nil, fmt.Errorf("-http: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	m := &monitor{collector: c, cancel: cancel, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
	m.wg.Go(func() {
		if err := m.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("wordcount: status page server failed", "err", err)
		}
	})
	m.wg.Go(func() { _ = c.Run(ctx) }) // returns nil once ctx is done
	fmt.Fprintf(out, "status page: http://%s/  Prometheus metrics: http://%s/metrics\n", ln.Addr(), ln.Addr())
	if host, _, _ := net.SplitHostPort(o.monitor.addr); !loopback(host) {
		logger.Warn("wordcount: -http serves beyond loopback", "addr", ln.Addr().String(), "exposed", exposed,
			"fix", "serve on 127.0.0.1 and reach it through an SSH tunnel or an authenticating TLS proxy")
	}
	return m, nil
}

// listeners returns the pipeline listeners of m: none for a nil m.
func (m *monitor) listeners() []stream.Listener {
	if m == nil {
		return nil
	}
	return []stream.Listener{m.collector}
}

// stop stops serving, waiting a second at most for requests in flight, and
// waits for m's goroutines. It does nothing for a nil m.
func (m *monitor) stop() {
	if m == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := m.srv.Shutdown(ctx); err != nil {
		m.srv.Close()
	}
	m.cancel()
	m.wg.Wait()
}
