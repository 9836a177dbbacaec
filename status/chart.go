package status

import (
	"fmt"
	"html/template"
	"math"
	"strings"
	"time"
)

// chart is one time series of the page, drawn as SVG.
type chart struct {
	Title  string
	Unit   string // "records/s" or "" for durations
	Last   string
	Avg    string
	Max    string
	Points int
	SVG    template.HTML
}

// point is a value at a batch time; bad marks a failed batch.
type point struct {
	t   time.Time
	v   float64
	bad bool
}

// Chart geometry, in SVG user units.
const (
	chartW, chartH             = 560, 160
	padLeft, padRight          = 56, 12
	padTop, padBottom          = 12, 22
	plotW                      = chartW - padLeft - padRight
	plotH                      = chartH - padTop - padBottom
	chartColor, chartFillColor = "#2f6fb5", "#2f6fb522"
)

// newChart draws pts (oldest first); format writes a value of the series.
func newChart(title, unit string, pts []point, format func(float64) string) chart {
	c := chart{Title: title, Unit: unit, Points: len(pts)}
	if len(pts) == 0 {
		c.Last, c.Avg, c.Max = "–", "–", "–"
		c.SVG = template.HTML(fmt.Sprintf(`<svg class="chart" data-points="0" viewBox="0 0 %d %d" role="img" aria-label="%s: no batches yet"><text x="%d" y="%d" class="empty">no batches yet</text></svg>`,
			chartW, chartH, template.HTMLEscapeString(title), chartW/2, chartH/2))
		return c
	}
	var sum, hi float64
	for _, p := range pts {
		sum += p.v
		hi = math.Max(hi, p.v)
	}
	avg := sum / float64(len(pts))
	c.Last, c.Avg, c.Max = format(pts[len(pts)-1].v), format(avg), format(hi)
	top := niceCeil(hi)
	t0, t1 := pts[0].t, pts[len(pts)-1].t
	span := t1.Sub(t0)
	x := func(t time.Time) float64 {
		if span <= 0 {
			return padLeft + plotW
		}
		return padLeft + plotW*float64(t.Sub(t0))/float64(span)
	}
	y := func(v float64) float64 { return padTop + plotH*(1-v/top) }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" data-points="%d" viewBox="0 0 %d %d" role="img" aria-label="%s over the last %d batches">`,
		len(pts), chartW, chartH, template.HTMLEscapeString(title), len(pts))
	for _, frac := range []float64{0, 0.5, 1} {
		v := top * frac
		fmt.Fprintf(&b, `<line class="grid" x1="%d" x2="%d" y1="%.1f" y2="%.1f"/><text class="axis" x="%d" y="%.1f" text-anchor="end">%s</text>`,
			padLeft, padLeft+plotW, y(v), y(v), padLeft-6, y(v)+4, template.HTMLEscapeString(format(v)))
	}
	fmt.Fprintf(&b, `<text class="axis" x="%d" y="%d">%s</text><text class="axis" x="%d" y="%d" text-anchor="end">%s</text>`,
		padLeft, chartH-6, t0.Format(time.TimeOnly), padLeft+plotW, chartH-6, t1.Format(time.TimeOnly))
	var line strings.Builder
	for _, p := range pts {
		fmt.Fprintf(&line, "%.1f,%.1f ", x(p.t), y(p.v))
	}
	coords := strings.TrimSpace(line.String())
	if len(pts) > 1 {
		fmt.Fprintf(&b, `<polygon fill="%s" points="%.1f,%.1f %s %.1f,%.1f"/>`, chartFillColor, x(t0), y(0), coords, x(t1), y(0))
	}
	fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.8" points="%s"/>`, chartColor, coords)
	fmt.Fprintf(&b, `<line class="avg" x1="%d" x2="%d" y1="%.1f" y2="%.1f"><title>average %s</title></line>`,
		padLeft, padLeft+plotW, y(avg), y(avg), template.HTMLEscapeString(format(avg)))
	for _, p := range pts {
		if p.bad {
			fmt.Fprintf(&b, `<circle class="failed" cx="%.1f" cy="%.1f" r="3.5"><title>failed batch %s</title></circle>`, x(p.t), y(p.v), p.t.Format(time.TimeOnly))
		}
	}
	last := pts[len(pts)-1]
	fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`, x(last.t), y(last.v), chartColor)
	b.WriteString(`</svg>`)
	c.SVG = template.HTML(b.String()) // built from numbers and escaped text only
	return c
}

// niceCeil returns the smallest of 1, 2, 2.5 or 5 times a power of ten
// that is >= v, so axis labels are round; 1 for v <= 0.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

// formatSeconds writes a duration given in seconds.
func formatSeconds(s float64) string {
	return formatDuration(time.Duration(s * float64(time.Second)))
}

// formatDuration writes d with two or three significant digits.
func formatDuration(d time.Duration) string {
	switch {
	case d == 0:
		return "0"
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.2gs", d.Seconds())
	}
	return d.Round(time.Second).String()
}

// formatRate writes a rate in records per second.
func formatRate(r float64) string {
	switch {
	case r >= 1e6:
		return fmt.Sprintf("%.3gM", r/1e6)
	case r >= 1e4:
		return fmt.Sprintf("%.3gk", r/1e3)
	case r >= 100 || r == math.Trunc(r):
		return fmt.Sprintf("%.0f", r)
	}
	return fmt.Sprintf("%.1f", r)
}
