package frontend_test

// A measurement, not a test of speed: with OWED_SPA_LONGTASKS=1 it seeds 5,000 more owed jobs
// into the browser tests' world, walks the admin SPA in Chromium as an operator does (Content
// jobs, several pages, a filter, a job's detail, Events, Overview, then 30 s idle on Overview
// and on Content jobs) and prints the long tasks (main-thread tasks of 50 ms or more, as the
// browser's PerformanceObserver reports them) per phase. It asserts nothing about time: the
// figures go to docs/benchmarks.md ("Admin SPA long tasks"). Without the variable it is skipped.
//
//	OWED_SPA_LONGTASKS=1 go test ./frontend -run LongTasks -v -count=1 -timeout 20m
//
// OWED_SPA_IDLE sets the idle phases' length (a Go duration, default 30s). With
// OWED_SPA_PROFILE=1 each phase also runs under Chrome's sampling CPU profiler, and a phase
// with a long task prints the functions that took the most time (self time) in it.

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/profiler"
	"github.com/chromedp/chromedp"

	"github.com/owed/owed/owedtest"
)

// longTaskObserver keeps every long task from the document's start in window.__lt.
const longTaskObserver = `(() => {
  window.__lt = [];
  try {
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) {
        const a = (e.attribution || [])[0];
        window.__lt.push({ start: e.startTime, dur: e.duration, name: e.name, by: a ? (a.containerType + ' ' + (a.containerSrc || a.containerName || '')).trim() : '' });
      }
    }).observe({ type: 'longtask', buffered: true });
  } catch (e) {
    window.__ltError = String(e);
  }
})();`

type longTask struct {
	Start float64 `json:"start"`
	Dur   float64 `json:"dur"`
	Name  string  `json:"name"`
	By    string  `json:"by"`
}

type phaseFigures struct {
	name  string
	wall  time.Duration
	tasks []longTask
	top   string // the profile's top functions, with OWED_SPA_PROFILE
}

func TestSPALongTasks(t *testing.T) {
	if os.Getenv("OWED_SPA_LONGTASKS") == "" {
		t.Skip("a measurement, run on request: OWED_SPA_LONGTASKS=1 go test ./frontend -run LongTasks -v")
	}
	idle := 30 * time.Second
	if s := os.Getenv("OWED_SPA_IDLE"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("OWED_SPA_IDLE=%s: %v", s, err)
		}
		idle = d
	}
	exe := chromiumPath(t)

	began := time.Now()
	w := seedWorld(t)
	seeded := w.seedOwedJobs(5000)
	t.Logf("seeded the world and %d more owed jobs in %v", seeded, time.Since(began).Round(time.Millisecond))
	st := w.api(t, "/api/admin/stats")
	total := num(obj(st["jobs"])["total"])
	t.Logf("owed jobs in all: %d, by why %v", total, obj(st["jobs"])["byWhy"])

	b := newBrowser(t, exe, w.env.Server.URL, w.offset)
	t.Cleanup(b.checkProblems)
	if _, err := chromedp.Call(b.ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: longTaskObserver}); err != nil {
		t.Fatalf("long-task observer: %v", err)
	}

	profile := os.Getenv("OWED_SPA_PROFILE") != ""
	if profile {
		if _, err := chromedp.Call(b.ctx, profiler.Enable, cdp.Empty{}); err != nil {
			t.Fatalf("profiler: %v", err)
		}
		if _, err := chromedp.Call(b.ctx, profiler.SetSamplingInterval, profiler.SetSamplingIntervalParams{Interval: 200}); err != nil {
			t.Fatalf("profiler: %v", err)
		}
	}
	var phases []phaseFigures
	// phase runs one step, lets the page settle (long tasks are reported after they end), and
	// takes the long tasks since the previous phase.
	phase := func(name string, settle time.Duration, do func()) {
		t.Helper()
		start := time.Now()
		if profile {
			if _, err := chromedp.Call(b.ctx, profiler.Start, cdp.Empty{}); err != nil {
				t.Fatalf("profiler: %v", err)
			}
		}
		do()
		time.Sleep(settle)
		tasks := eval[[]longTask](t, b, `window.__lt ? window.__lt.splice(0) : []`)
		f := phaseFigures{name: name, wall: time.Since(start), tasks: tasks}
		if profile {
			res, err := chromedp.Call(b.ctx, profiler.Stop, cdp.Empty{})
			if err != nil {
				t.Fatalf("profiler: %v", err)
			}
			if len(tasks) > 0 {
				f.top = topFunctions(res.Profile, 12)
			}
		}
		phases = append(phases, f)
	}
	const settle = 1500 * time.Millisecond

	phase("sign in, Overview loads", settle, func() {
		b.do(t, "open /admin/", chromedp.Navigate(b.base+"/admin/"), chromedp.WaitVisible(tid("signin-token")))
		if e := eval[string](t, b, `window.__ltError || ''`); e != "" {
			t.Fatalf("this Chromium has no long-task observer: %s", e)
		}
		b.fill(t, "signin-token", owedtest.AdminToken)
		b.click(t, "signin-submit")
		b.waitJS(t, "the console", jsVisible("panel-overview")+` && `+jsText("stat-jobs-total")+` !== ''`)
	})
	pageOf := func(n int) string {
		return jsText("jobs-count") + `.includes('page ` + fmt.Sprint(n) + ` of')`
	}
	phase("Content jobs loads (50 rows)", settle, func() {
		b.tab(t, "jobs")
		b.waitJS(t, "the first page", pageOf(1)+` && document.querySelectorAll('[data-testid="jobs-table"] tbody tr').length === 50`)
	})
	const pages = 6
	phase(fmt.Sprintf("Next, %d pages", pages-1), settle, func() {
		for p := 2; p <= pages; p++ {
			b.click(t, "jobs-next")
			b.waitJS(t, fmt.Sprintf("page %d", p), pageOf(p)+` && document.querySelectorAll('[data-testid="jobs-table"] tbody tr').length === 50`)
		}
	})
	phase("filter why = upstream", settle, func() {
		b.choose(t, "jobs-filter-why", "upstream")
		b.waitJS(t, "only upstream jobs", `location.search.includes('why=upstream') && `+pageOf(1)+
			` && [...document.querySelectorAll('[data-testid="jobs-table"] tbody tr')].every((r) => r.textContent.includes('upstream'))`)
	})
	phase("open a job's detail", settle, func() {
		id := eval[string](t, b, `document.querySelector('[data-testid="jobs-table"] tbody tr').dataset.testid.replace('job-row-', '')`)
		b.click(t, "job-detail-"+id)
		b.waitText(t, "job-detail", "Job "+id)
		b.waitText(t, "job-events")
	})
	phase("Events", settle, func() {
		b.tab(t, "events")
		b.waitJS(t, "events listed", `document.querySelectorAll('[data-testid="panel-events"] tbody tr').length > 0`)
	})
	phase("Overview", settle, func() {
		b.tab(t, "overview")
		b.waitJS(t, "the overview's figures", jsText("stat-jobs-total")+` !== ''`)
	})
	phase(fmt.Sprintf("idle on Overview, %v", idle), 0, func() { time.Sleep(idle) })
	phase("back to Content jobs, filter cleared", settle, func() {
		b.tab(t, "jobs")
		b.choose(t, "jobs-filter-why", "")
		// The table comes back at the page it showed for no filter before (page 6).
		b.waitJS(t, "the unfiltered jobs", `!location.search.includes('why=') && `+jsText("jobs-count")+`.startsWith('5,0')`+
			` && document.querySelectorAll('[data-testid="jobs-table"] tbody tr').length === 50`)
	})
	phase(fmt.Sprintf("idle on Content jobs, %v", idle), 0, func() { time.Sleep(idle) })

	var out strings.Builder
	fmt.Fprintf(&out, "\nowed jobs: %d; Chromium %s; GOMAXPROCS %d\n", total, exe, runtime.GOMAXPROCS(0))
	fmt.Fprintf(&out, "| phase | wall | long tasks | max (ms) | durations (ms) |\n| --- | --- | --- | --- | --- |\n")
	for _, p := range phases {
		var max float64
		durs := make([]string, 0, len(p.tasks))
		for _, lt := range p.tasks {
			max = maxf(max, lt.Dur)
			durs = append(durs, fmt.Sprintf("%.0f", lt.Dur))
		}
		m := "—"
		if len(p.tasks) > 0 {
			m = fmt.Sprintf("%.0f", max)
		}
		fmt.Fprintf(&out, "| %s | %.1f s | %d | %s | %s |\n", p.name, p.wall.Seconds(), len(p.tasks), m, strings.Join(durs, ", "))
	}
	for _, p := range phases {
		if p.top != "" {
			fmt.Fprintf(&out, "\nprofile of %q (self time, ms):\n%s", p.name, p.top)
		}
	}
	t.Log(out.String())
}

// topFunctions sums a sampled profile's self time by function and source position.
func topFunctions(p *profiler.Profile, n int) string {
	if p == nil {
		return ""
	}
	byID := map[int64]*profiler.ProfileNode{}
	for _, nd := range p.Nodes {
		byID[nd.ID] = nd
	}
	self := map[string]float64{}
	for i, id := range p.Samples {
		if i >= len(p.TimeDeltas) {
			break
		}
		// A sample's time is the delta to the next one.
		var d int64
		if i+1 < len(p.TimeDeltas) {
			d = p.TimeDeltas[i+1]
		}
		nd := byID[id]
		if nd == nil || nd.CallFrame == nil {
			continue
		}
		cf := nd.CallFrame
		name := cf.FunctionName
		if name == "" {
			name = "(anonymous)"
		}
		if cf.URL != "" {
			u := cf.URL
			if i := strings.Index(u, "/admin/"); i >= 0 {
				u = u[i+len("/admin/"):]
			}
			name += fmt.Sprintf(" %s:%d", u, cf.LineNumber+1)
		}
		self[name] += float64(d) / 1000
	}
	keys := make([]string, 0, len(self))
	for k := range self {
		if k != "(idle)" {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return self[keys[i]] > self[keys[j]] })
	var out strings.Builder
	for i, k := range keys {
		if i == n {
			break
		}
		fmt.Fprintf(&out, "  %8.1f  %s\n", self[k], k)
	}
	return out.String()
}

func maxf(a, b float64) float64 {
	if b > a {
		return b
	}
	return a
}

// seedOwedJobs writes n items (songs and pitches) for 100 authors and leaves their jobs owed in
// the mixes an operator meets during an outage: a fifth each rescheduled after a 503, after a
// refused connection and after a garbled answer, the rest due and never tried. It returns how
// many jobs it added.
func (w *world) seedOwedJobs(n int) int {
	w.t.Helper()
	env := w.env
	const authors = 100
	toks := make([]string, authors)
	for i := range toks {
		_, toks[i] = env.User(fmt.Sprintf("op%03d", i), "author")
	}
	made := 0
	post := func(count int) {
		for range count {
			tok := toks[made%authors]
			var r owedtest.Response
			if made%2 == 0 {
				r = env.Do(http.MethodPost, "/api/listeners/songs", tok, map[string]string{
					"title": fmt.Sprintf("%s %d", songTitles[made%len(songTitles)], made), "code": fmt.Sprintf(`s("bd*%d sd")`, made%7+1)})
			} else {
				r = env.Do(http.MethodPost, "/api/listeners/pitches", tok, map[string]string{"body": fmt.Sprintf("pitch %d: %s remix?", made, songTitles[made%len(songTitles)])})
			}
			w.ok(r, http.StatusCreated, "seed an owed item")
			made++
		}
	}
	sweepOnce := func() {
		if _, err := w.sweeper.Sweep(context.Background(), 0); err != nil {
			w.t.Fatalf("sweep: %v", err)
		}
	}
	post(n / 5)
	env.Model.Fail(http.StatusServiceUnavailable, nil)
	sweepOnce()
	env.Model.Reset()
	post(n / 5)
	env.Model.DropConnections()
	sweepOnce()
	env.Model.Reset()
	post(n / 5)
	env.Model.Garbage()
	sweepOnce()
	env.Model.Reset()
	post(n - made)
	return made
}
