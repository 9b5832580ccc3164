package main

import (
	"encoding/json"
	"fmt"
	"html"
	"math"
	"os"
	"strings"
)

// drawChart writes an SVG of one scenario from trace files: for each trace, the queue's
// predicted finish (the last scheduled job's etaTotalMs, added to the sample's time) at every
// sample, and its actual finish as a dashed line; seconds since the queue's first request.
func drawChart(files, labels []string, scenario, out string) error {
	type series struct {
		label  string
		points [][2]float64 // sample time, predicted finish (s)
		actual float64
	}
	var all []series
	for i, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var traces []scenarioTrace
		if err := json.Unmarshal(raw, &traces); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		label := f
		if i < len(labels) && labels[i] != "" {
			label = labels[i]
		}
		for _, tr := range traces {
			if tr.Scenario != scenario {
				continue
			}
			s := series{label: label}
			for _, v := range tr.Finish {
				s.actual = math.Max(s.actual, float64(v)/1000)
			}
			for _, smp := range tr.Samples {
				var end *int64
				for _, j := range smp.Status.Jobs {
					if scheduled(j.State) && j.EtaTotalMs != nil && (end == nil || *j.EtaTotalMs > *end) {
						end = j.EtaTotalMs
					}
				}
				if end != nil {
					s.points = append(s.points, [2]float64{float64(smp.At) / 1000, float64(smp.At+*end) / 1000})
				}
			}
			all = append(all, s)
		}
	}
	if len(all) == 0 {
		return fmt.Errorf("no trace has the scenario %q", scenario)
	}
	xMax, yMax := 0.0, 0.0
	for _, s := range all {
		xMax = math.Max(xMax, s.actual)
		yMax = math.Max(yMax, s.actual)
	}
	xMax = math.Ceil(xMax/10) * 10
	yMax = math.Ceil(yMax*2/10) * 10 // predictions beyond twice the actual finish are clipped
	const (
		left, top, w, h = 70.0, 60.0, 700.0, 360.0
	)
	px := func(x float64) float64 { return left + w*x/xMax }
	py := func(y float64) float64 { return top + h - h*math.Min(math.Max(y, 0), yMax)/yMax }
	colours := []string{"#c53030", "#2b6cb0", "#2f855a", "#805ad5"}
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	height := int(top + h + 70)
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="860" height="%d" viewBox="0 0 860 %d" font-family="sans-serif" font-size="12">`, height, height)
	p(`<rect width="100%%" height="100%%" fill="white"/>`)
	p(`<text x="10" y="22" font-size="15" font-weight="bold">Backfill ETA: predicted vs actual end of the queue (%s)</text>`, html.EscapeString(scenario))
	p(`<text x="10" y="40" font-size="11" fill="#555">each dot: a status sample's time + the last scheduled job's etaTotalMs; dashed: when the queue really ended; clipped at %g s</text>`, yMax)
	for x := 0.0; x <= xMax; x += 10 {
		p(`<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#eee"/>`, px(x), top, px(x), top+h)
		p(`<text x="%.1f" y="%.0f" text-anchor="middle" font-size="11">%g</text>`, px(x), top+h+16, x)
	}
	step := 10.0
	if yMax > 150 {
		step = 30
	}
	for y := 0.0; y <= yMax; y += step {
		p(`<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#eee"/>`, left, py(y), left+w, py(y))
		p(`<text x="%.0f" y="%.1f" text-anchor="end" font-size="11">%g</text>`, left-6, py(y)+4, y)
	}
	p(`<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#333"/>`, left, top+h, left+w, top+h)
	p(`<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#333"/>`, left, top, left, top+h)
	p(`<text x="%.0f" y="%.0f" text-anchor="middle" font-size="11">sample time, s since the queue's first request</text>`, left+w/2, top+h+36)
	p(`<text x="16" y="%.0f" font-size="11" transform="rotate(-90 16 %.0f)" text-anchor="middle">predicted end, s</text>`, top+h/2, top+h/2)
	p(`<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#999" stroke-dasharray="2,3"/>`, px(countAfter.Seconds()), top, px(countAfter.Seconds()), top+h)
	p(`<text x="%.1f" y="%.0f" font-size="10" fill="#777">30 s: errors counted from here</text>`, px(countAfter.Seconds())+3, top+12)
	for i, s := range all {
		c := colours[i%len(colours)]
		p(`<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="%s" stroke-width="1.5" stroke-dasharray="6,4"/>`, left, py(s.actual), left+w, py(s.actual), c)
		var path strings.Builder
		for k, pt := range s.points {
			cmd := "L"
			if k == 0 {
				cmd = "M"
			}
			fmt.Fprintf(&path, "%s%.1f,%.1f ", cmd, px(pt[0]), py(pt[1]))
		}
		p(`<path d="%s" fill="none" stroke="%s" stroke-width="1.5"/>`, strings.TrimSpace(path.String()), c)
		for _, pt := range s.points {
			p(`<circle cx="%.1f" cy="%.1f" r="2" fill="%s"/>`, px(pt[0]), py(pt[1]), c)
		}
		ly := top + 16 + float64(i)*16
		p(`<rect x="%.0f" y="%.0f" width="12" height="3" fill="%s"/>`, left+w-230, ly-4, c)
		p(`<text x="%.0f" y="%.0f" font-size="11">%s (ended at %.0f s)</text>`, left+w-212, ly, html.EscapeString(s.label), s.actual)
	}
	p(`</svg>`)
	return os.WriteFile(out, []byte(b.String()), 0o644)
}
