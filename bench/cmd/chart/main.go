// Command chart draws owed-vs-river.svg, the chart in docs/benchmarks.md, from the figures
// kept in figures.json (ratios that cmd/screen and cmd/queue print): one group of bars per
// comparison, each bar owed's throughput over River's on a log scale, with the goal marked.
//
//	cd bench && go run ./cmd/chart                 # -in figures.json -out owed-vs-river.svg
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"html"
	"math"
	"os"
	"strings"
)

type figures struct {
	Title    string  `json:"title"`
	Subtitle string  `json:"subtitle"`
	Groups   []group `json:"groups"`
}

type group struct {
	Name string  `json:"name"`
	Goal float64 `json:"goal"`
	Bars []bar   `json:"bars"`
}

type bar struct {
	Label string  `json:"label"`
	Ratio float64 `json:"ratio"`
	// Kind colours the bar: "owed" (owed as it ships), "owed-alt" (another of owed's own
	// paths), "what-if" (not owed's code).
	Kind string `json:"kind"`
}

// The plot's frame: bars start at left and the log axis runs from lo× to hi× across width.
const (
	left, width = 250.0, 570.0
	lo, hi      = 0.1, 50.0
	barHeight   = 18
	rowHeight   = 24
)

func x(ratio float64) float64 {
	r := math.Min(math.Max(ratio, lo), hi)
	return left + width*math.Log(r/lo)/math.Log(hi/lo)
}

func main() {
	in := flag.String("in", "figures.json", "the figures")
	out := flag.String("out", "owed-vs-river.svg", "the chart to write")
	flag.Parse()
	raw, err := os.ReadFile(*in)
	if err != nil {
		fail(err)
	}
	var f figures
	if err := json.Unmarshal(raw, &f); err != nil {
		fail(fmt.Errorf("%s: %w", *in, err))
	}
	if err := os.WriteFile(*out, []byte(draw(f)), 0o644); err != nil {
		fail(err)
	}
}

func draw(f figures) string {
	height := 74 // the title, then each group: its name, its bars, a gap; then the axis
	for _, g := range f.Groups {
		height += 12 + rowHeight*len(g.Bars) + 40
	}
	height += 30
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="860" height="%d" viewBox="0 0 860 %d" font-family="sans-serif" font-size="12">`, height, height)
	p(`<rect width="100%%" height="100%%" fill="white"/>`)
	p(`<text x="10" y="22" font-size="15" font-weight="bold">%s</text>`, html.EscapeString(f.Title))
	p(`<text x="10" y="40" font-size="11" fill="#555">%s</text>`, html.EscapeString(f.Subtitle))
	axis := float64(height - 40)
	for _, t := range []float64{0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50} {
		p(`<line x1="%.1f" y1="50" x2="%.1f" y2="%.0f" stroke="#ddd"/>`, x(t), x(t), axis)
		p(`<text x="%.1f" y="%.0f" text-anchor="middle" font-size="11">%s×</text>`, x(t), axis+16, trim(t))
	}
	p(`<line x1="%.1f" y1="50" x2="%.1f" y2="%.0f" stroke="#333" stroke-width="1.5"/>`, x(1), x(1), axis)
	colour := map[string]string{"owed": "#2b6cb0", "owed-alt": "#4a90d9", "what-if": "#9ab8de"}
	y := 74
	for _, g := range f.Groups {
		p(`<text x="10" y="%d" font-weight="bold">%s</text>`, y, html.EscapeString(g.Name))
		top := y + 6
		y += 12
		for _, br := range g.Bars {
			c, ok := colour[br.Kind]
			if !ok {
				c = colour["owed"]
			}
			p(`<text x="242" y="%d" text-anchor="end">%s</text>`, y+13, html.EscapeString(br.Label))
			p(`<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"/>`, left, y, x(br.Ratio)-left, barHeight, c)
			p(`<text x="%.1f" y="%d">%.2f×</text>`, x(br.Ratio)+5, y+13, br.Ratio)
			y += rowHeight
		}
		if g.Goal > 0 {
			p(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#c53030" stroke-width="2" stroke-dasharray="5,3"/>`, x(g.Goal), top, x(g.Goal), y)
			p(`<text x="%.1f" y="%d" fill="#c53030" font-size="11">goal %s×</text>`, x(g.Goal)+4, top+2, trim(g.Goal))
		}
		y += 40
	}
	p(`<text x="535" y="%d" text-anchor="middle" font-size="11">jobs/s of owed ÷ jobs/s of River doing the same work</text>`, height-6)
	p(`</svg>`)
	return b.String()
}

func trim(v float64) string { return strings.TrimSuffix(fmt.Sprintf("%g", v), ".0") }

func fail(err error) {
	fmt.Fprintln(os.Stderr, "chart:", err)
	os.Exit(1)
}
