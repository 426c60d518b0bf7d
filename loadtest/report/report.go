// Package report writes a sale's report as one self-contained HTML page:
// the summary, the invariants, and line charts drawn as inline SVG (no
// script, no external resource: the page opens offline and anywhere).
package report

import (
	"fmt"
	"html/template"
	"math"
	"os"
	"sort"
	"strings"
)

// Point is one value at T seconds after onsale.
type Point struct{ T, V float64 }

// Line is one named series.
type Line struct {
	Name   string
	Points []Point
	Dashed bool
}

// Chart is one chart of one or more lines.
type Chart struct {
	Title string
	Unit  string
	Lines []Line
}

// Latency is one endpoint's latency summary, in milliseconds.
type Latency struct {
	Route              string
	Count              int
	P50, P90, P99, Max float64
}

// Process is what one process (with its children) cost during the sale.
type Process struct {
	Name             string
	CPUPeak, CPUMean float64 // cores
	CPUSale          float64 // cores, over the sale (without the sign-in ahead)
	MemPeakMB        float64
	Procs            int
}

// Check is one invariant's verdict.
type Check struct {
	Name, Detail string
	Pass         bool
}

// Count is one named count, with what it means.
type Count struct {
	Name  string
	Value int64
	Note  string
}

// Marker is a moment marked on every time chart: a vertical line at T
// seconds after onsale, labelled (a fault injected).
type Marker struct {
	T     float64
	Label string
}

// Fault is one fault injected during the sale, for the faults table: when
// (seconds after onsale), what it hit, when its target was back, and what
// it did to the sale.
type Fault struct {
	Name, Target string
	At           float64
	Back         string   // "9.8 s" after the injection, or why not
	Rejoined     string   // the victim back in the topology ("" when the fault has no such step)
	Errors       []string // per endpoint and class: "status 503: 4 s (28)"
	Stall        string   // how long admission stood still, and its resumption
	Effective    string   // the effective admission rate in the window ("" when not reported)
	Detail       string
	Failed       bool // injecting it or bringing its target back went wrong
}

// Answers is one endpoint's answers over the sale, by class (an HTTP
// status, "conn", "timeout"), with the seconds in which any came.
type Answers struct {
	Route   string
	Classes []ClassCount
}

// ClassCount is one class of answers to one endpoint.
type ClassCount struct {
	Class   string
	N       int
	Seconds int
	Error   bool // a failure of the service (5xx, no connection, no answer in time)
}

// Report is everything the page shows.
type Report struct {
	Title   string
	Summary []string
	// Markers are drawn on every chart; Faults fill the faults table
	// (none: the section is left out); Answers the answers table.
	Markers []Marker
	Faults  []Fault
	Answers []Answers
	// SignIns counts the crowd's sign-ins (codes asked for, verified,
	// refused, limited; bots refused for want of an account); none: the
	// fans were guests and the section says so.
	SignIns   []Count
	Checks    []Check
	Charts    []Chart
	Latencies []Latency
	Processes []Process
	Errors    map[string]int
}

var colours = []string{"#1a5276", "#c0392b", "#1e8449", "#b9770e", "#6c3483", "#17a589", "#7f8c8d"}

// chartWithMarkers is a chart and the moments to mark on it.
type chartWithMarkers struct {
	Chart
	Markers []Marker
}

// svg draws a chart: 640x220, axes with a few labels, one polyline a line,
// a dashed vertical line for each marker with its label along it.
func svg(c chartWithMarkers) template.HTML {
	const w, h, left, bottom, top, right = 640.0, 220.0, 56.0, 28.0, 10.0, 10.0
	var tmin, tmax, vmax = math.Inf(1), math.Inf(-1), 0.0
	for _, l := range c.Lines {
		for _, p := range l.Points {
			tmin, tmax, vmax = math.Min(tmin, p.T), math.Max(tmax, p.T), math.Max(vmax, p.V)
		}
	}
	if math.IsInf(tmin, 0) {
		return template.HTML(`<p class="muted">no data</p>`)
	}
	for _, m := range c.Markers { // a fault after the last reading still shows
		if m.T > tmax && m.T-tmax < (tmax-tmin)/2 {
			tmax = m.T
		}
	}
	if tmax <= tmin {
		tmax = tmin + 1
	}
	vmax = niceCeil(vmax)
	x := func(t float64) float64 { return left + (t-tmin)/(tmax-tmin)*(w-left-right) }
	y := func(v float64) float64 { return h - bottom - v/vmax*(h-bottom-top) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg viewBox="0 0 %.0f %.0f" role="img" aria-label="%s">`, w, h, template.HTMLEscapeString(c.Title))
	for i := 0; i <= 4; i++ {
		v := vmax * float64(i) / 4
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" class="grid"/><text x="%.1f" y="%.1f" class="axis" text-anchor="end">%s</text>`,
			left, w-right, y(v), y(v), left-6, y(v)+4, short(v))
	}
	for i := 0; i <= 5; i++ {
		t := tmin + (tmax-tmin)*float64(i)/5
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" class="axis" text-anchor="middle">%+.0fs</text>`, x(t), h-8, t)
	}
	for i, l := range c.Lines {
		var pts []string
		for _, p := range l.Points {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(p.T), y(p.V)))
		}
		dash := ""
		if l.Dashed {
			dash = ` stroke-dasharray="6 4"`
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`, colours[i%len(colours)], dash, strings.Join(pts, " "))
	}
	for _, m := range c.Markers {
		if m.T < tmin || m.T > tmax {
			continue
		}
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" class="marker"><title>%s</title></line>`,
			x(m.T), x(m.T), top, h-bottom, template.HTMLEscapeString(m.Label))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" class="mlabel" transform="rotate(90 %.1f %.1f)">%s</text>`,
			x(m.T)+3, top+2, x(m.T)+3, top+2, template.HTMLEscapeString(m.Label))
	}
	b.WriteString(`</svg><p class="legend">`)
	for i, l := range c.Lines {
		fmt.Fprintf(&b, `<span><i style="background:%s"></i>%s</span> `, colours[i%len(colours)], template.HTMLEscapeString(l.Name))
	}
	b.WriteString(`</p>`)
	return template.HTML(b.String())
}

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

func short(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.1fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	case v < 10 && v != math.Trunc(v):
		return fmt.Sprintf("%.1f", v) // 0.5 cores, not "0"
	}
	return fmt.Sprintf("%.0f", v)
}

var page = template.Must(template.New("report").Funcs(template.FuncMap{"svg": svg,
	"marked": func(c Chart, m []Marker) chartWithMarkers { return chartWithMarkers{c, m} }}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
body { font: 15px/1.45 system-ui, sans-serif; color: #17202a; margin: 0; background: #f7f9f9; }
header { background: #1a5276; color: #fff; padding: .8rem 1.2rem; } h1 { margin: 0; font-size: 1.2rem; }
main { max-width: 72rem; margin: 0 auto; padding: 1rem; }
.grid2 { display: grid; grid-template-columns: repeat(auto-fit, minmax(30rem, 1fr)); gap: 1rem; }
section { background: #fff; border: 1px solid #d5dbdb; border-radius: .5rem; padding: .8rem 1rem; margin-bottom: 1rem; overflow-x: auto; }
h2 { font-size: 1rem; margin: 0 0 .5rem; } svg { width: 100%; height: auto; }
.grid { stroke: #e5e8e8; } .axis { font-size: 11px; fill: #5d6d7e; }
.legend span { margin-right: 1rem; font-size: .85rem; } .legend i { display: inline-block; width: .8rem; height: .8rem; margin-right: .3rem; vertical-align: middle; }
table { border-collapse: collapse; width: 100%; } td, th { padding: .25rem .5rem; border-bottom: 1px solid #e5e8e8; text-align: right; } td:first-child, th:first-child { text-align: left; }
.marker { stroke: #a93226; stroke-width: 1.5; stroke-dasharray: 4 3; } .mlabel { font-size: 10px; fill: #a93226; }
td.l { text-align: left; } td ul { margin: 0; padding-left: 1rem; }
.pass { color: #1e8449; font-weight: 700; } .fail { color: #a93226; font-weight: 700; } .muted { color: #5d6d7e; }
</style></head>
<body><header><h1>{{.Title}}</h1></header><main>
<section><h2>Summary</h2>{{range .Summary}}<p>{{.}}</p>{{end}}</section>
<section><h2>Sign-ins</h2>{{if .SignIns}}<table><tr><th>what</th><th>count</th><th></th></tr>
{{range .SignIns}}<tr><td>{{.Name}}</td><td>{{.Value}}</td><td class="muted">{{.Note}}</td></tr>{{end}}</table>{{else}}<p>none: the fans joined as guests (the event required no account)</p>{{end}}</section>
<section><h2>Invariants</h2><table>{{range .Checks}}<tr><td>{{if .Pass}}<span class="pass">PASS</span>{{else}}<span class="fail">FAIL</span>{{end}} {{.Name}}</td><td class="muted">{{.Detail}}</td></tr>{{end}}</table></section>
{{if .Faults}}<section><h2>Faults injected during the sale</h2><table><tr><th>fault</th><th>at</th><th>target</th><th>back after</th><th>errors (endpoint class: seconds with errors, answers)</th><th>admission</th><th>effective rate</th></tr>
{{range .Faults}}<tr><td>{{if .Failed}}<span class="fail">{{.Name}}</span>{{else}}{{.Name}}{{end}}</td><td>{{printf "%+.0f" .At}} s</td><td class="l">{{.Target}}</td><td class="l">{{.Back}}{{if .Rejoined}}; rejoined after {{.Rejoined}}{{end}}</td>
<td class="l">{{if .Errors}}<ul>{{range .Errors}}<li>{{.}}</li>{{end}}</ul>{{else}}none{{end}}</td><td class="l">{{.Stall}}</td><td class="l">{{if .Effective}}{{.Effective}}{{else}}<span class="muted">not reported</span>{{end}}</td></tr>
<tr><td></td><td colspan="6" class="l muted">{{.Detail}}</td></tr>{{end}}</table></section>{{end}}
<div class="grid2">{{$m := .Markers}}{{range .Charts}}<section><h2>{{.Title}}{{if .Unit}} <span class="muted">({{.Unit}})</span>{{end}}</h2>{{svg (marked . $m)}}</section>{{end}}</div>
<section><h2>Latency per endpoint (ms, as the crowd saw it)</h2><table><tr><th>endpoint</th><th>requests</th><th>p50</th><th>p90</th><th>p99</th><th>max</th></tr>
{{range .Latencies}}<tr><td>{{.Route}}</td><td>{{.Count}}</td><td>{{printf "%.1f" .P50}}</td><td>{{printf "%.1f" .P90}}</td><td>{{printf "%.1f" .P99}}</td><td>{{printf "%.1f" .Max}}</td></tr>{{end}}</table></section>
{{if .Processes}}<section><h2>Processes (CPU in cores of this machine; memory is the peak sum of proportional set sizes, children included)</h2><table><tr><th>process</th><th>processes</th><th>CPU over the sale</th><th>CPU mean (whole run)</th><th>CPU peak (1 s)</th><th>memory peak (MB)</th></tr>
{{range .Processes}}<tr><td>{{.Name}}</td><td>{{.Procs}}</td><td>{{printf "%.2f" .CPUSale}}</td><td>{{printf "%.2f" .CPUMean}}</td><td>{{printf "%.2f" .CPUPeak}}</td><td>{{printf "%.0f" .MemPeakMB}}</td></tr>{{end}}</table></section>{{end}}
{{if .Answers}}<section><h2>Answers per endpoint, by status (conn: no connection; timeout: no answer in time)</h2><table><tr><th>endpoint</th><th>answers: count (seconds in which any came)</th></tr>
{{range .Answers}}<tr><td>{{.Route}}</td><td class="l">{{range .Classes}}<span{{if .Error}} class="fail"{{end}}>{{.Class}}: {{.N}} ({{.Seconds}} s)</span> &nbsp; {{end}}</td></tr>{{end}}</table></section>{{end}}
<section><h2>Errors by kind</h2>{{if .Errors}}<table>{{range $k, $v := .Errors}}<tr><td>{{$k}}</td><td>{{$v}}</td></tr>{{end}}</table>{{else}}<p>none</p>{{end}}</section>
</main></body></html>
`))

// Write writes the report to path.
func Write(path string, r Report) error {
	sort.Slice(r.Latencies, func(i, j int) bool { return r.Latencies[i].Route < r.Latencies[j].Route })
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return page.Execute(f, r)
}
