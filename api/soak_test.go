package api_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/owed/owed/app"
	"github.com/owed/owed/media"
	"github.com/owed/owed/models"
	"github.com/owed/owed/outbound"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/owedtest/clocktest"
	"github.com/owed/owed/scheduler"
)

// The fault soak: a model and a CDN that answer at random with 503s, 429s with Retry-After,
// garbage, dropped connections and timeouts, a few thousand items and media rows through them
// (OWED_SOAK=1; a smaller default keeps the suite quick), the fake clock advanced between
// sweeps so backoffs come due, and then the invariants: nothing lost or doubled, budget spent
// equals the calls the model received, no author over their limit, every pending job with a
// why and a next attempt, every media row final.

// soakSize is how many items and media rows a soak puts through: the full size with
// OWED_SOAK=1, a small one by default (under 30 s with -race), smaller still with -short.
func soakSize() (items, rows int) {
	switch {
	case os.Getenv("OWED_SOAK") == "1":
		return 3000, 3000
	case testing.Short():
		return 60, 60
	}
	return 240, 240
}

// soakRand is a seeded source (OWED_SOAK_SEED replays a run), safe for concurrent use.
type soakRand struct {
	mu   sync.Mutex
	r    *rand.Rand
	seed uint64
}

func newSoakRand(t *testing.T) *soakRand {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("OWED_SOAK_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("soak seed %d (OWED_SOAK_SEED replays it)", seed)
	return &soakRand{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), seed: seed}
}

func (s *soakRand) IntN(n int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.r.IntN(n)
}

// pick chooses a fault by weight (weights in percent; the rest is "ok").
func (s *soakRand) pick(weights []fault) string {
	n := s.IntN(100)
	for _, w := range weights {
		if n < w.pct {
			return w.name
		}
		n -= w.pct
	}
	return "ok"
}

type fault struct {
	name string
	pct  int
}

// abortHandler ends a request without an answer: the client sees the connection close.
func abortHandler() { panic(http.ErrAbortHandler) }

// faultyModel is a modeltest hook answering at random with a fault, else as the model would
// (blocking what holds "#block"). The three runs of one score are held until all three have
// arrived, so every run the budget is charged for reaches the model even when a sibling run's
// fault cancels the others.
type faultyModel struct {
	rng     *soakRand
	timeout time.Duration
	down    atomic.Bool // an outage: every call answers 503

	mu     sync.Mutex
	faults map[string]int
	gates  map[[32]byte]*runGate
}

type runGate struct {
	n    int
	open chan struct{}
}

var modelFaults = []fault{{"503", 6}, {"429", 5}, {"garbage", 4}, {"nonsense", 3}, {"drop", 4}, {"timeout", 3}}

func (f *faultyModel) gather(ctx context.Context, body []byte) {
	key := sha256.Sum256(body)
	f.mu.Lock()
	g := f.gates[key]
	if g == nil {
		g = &runGate{open: make(chan struct{})}
		f.gates[key] = g
	}
	g.n++
	if g.n == 3 {
		close(g.open)
		delete(f.gates, key)
	}
	f.mu.Unlock()
	select {
	case <-g.open:
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		f.mu.Lock()
		if f.gates[key] == g {
			delete(f.gates, key)
		}
		f.mu.Unlock()
	}
}

func (f *faultyModel) handle(w http.ResponseWriter, r *http.Request) bool {
	body, _ := io.ReadAll(r.Body)
	var req struct {
		Task    string
		Subject struct{ Text string }
	}
	json.Unmarshal(body, &req)
	if req.Task == "score" {
		f.gather(r.Context(), body)
	}
	what := f.rng.pick(modelFaults)
	if f.down.Load() {
		what = "down"
	}
	f.mu.Lock()
	f.faults[what]++
	f.mu.Unlock()
	switch what {
	case "503", "down":
		http.Error(w, `{"error":"overloaded"}`, http.StatusServiceUnavailable)
	case "429":
		switch f.rng.IntN(3) {
		case 0:
			w.Header().Set("Retry-After", strconv.Itoa(1+f.rng.IntN(120)))
		case 1:
			w.Header().Set("Retry-After", time.Now().Add(time.Duration(f.rng.IntN(300))*time.Second).UTC().Format(http.TimeFormat))
		default:
			w.Header().Set("retry-after-ms", strconv.Itoa(f.rng.IntN(90_000)))
		}
		http.Error(w, `{"error":"slow down"}`, http.StatusTooManyRequests)
	case "garbage":
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"answers": [{"verdict": "allow", "confid`)
	case "nonsense":
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"answers":[{"verdict":"maybe","confidence":7,"art":-1}]}`)
	case "drop":
		abortHandler()
	case "timeout":
		select {
		case <-r.Context().Done():
		case <-time.After(4 * f.timeout):
		}
		abortHandler()
	default:
		if req.Task != "screen" || !strings.Contains(req.Subject.Text, "#block") {
			r.Body = io.NopCloser(bytes.NewReader(body))
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"answers":[{"verdict":"block","confidence":0.7}]}`)
	}
	return true
}

// soakItem is an item the soak wrote.
type soakItem struct {
	kind models.Kind
	id   int64
}

// soakClient calls the API from any goroutine, returning errors instead of failing.
func soakCall(env *owedtest.Env, method, path, token string, body any) (int, map[string]any, error) {
	r, err := owedtest.Call(env.Server.Client(), env.Server.URL, method, path, token, body)
	if err != nil && r.Status == 0 {
		return 0, nil, err
	}
	return r.Status, r.JSON(), nil
}

func idOf(v any) int64 {
	m, _ := v.(map[string]any)
	f, _ := m["id"].(float64)
	return int64(f)
}

// TestSoakContentUnderModelFaults writes items through the API while the periodic sweep, the
// writes' inline claims and the authors' views race for the jobs, against a model that fails
// about a quarter of its calls in every way it can; it advances the clock between sweeps
// (across UTC midnights, so budgets refill) until nothing is owed, checking at every step that
// each pending job has a why and a next attempt and that no job outlives its item, and at the
// end that each item has exactly one verdict and each allowed revision exactly one score, that
// the budget spent equals the calls the model received, and that no author spent past their
// limit on any day.
func TestSoakContentUnderModelFaults(t *testing.T) {
	t.Parallel()
	items, _ := soakSize()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		const dailyBudget, lowLimit = 60, 12
		modelTimeout := 300 * time.Millisecond
		env := owedtest.NewEnv(t, db, func(c *app.Config) {
			c.ModelTimeout = modelTimeout
			c.InlineWait = 0
			c.DailyBudget = dailyBudget
			c.SweepConcurrency = 16
		})
		rng := newSoakRand(t)
		fm := &faultyModel{rng: rng, timeout: modelTimeout, faults: map[string]int{}, gates: map[[32]byte]*runGate{}}
		env.Model.Handle(fm.handle)
		env.Model.KeepRequests(false)
		store := env.App.Store
		ctx := context.Background()
		started := time.Now()

		// Authors: one in five has a low limit of their own.
		nAuthors := max(3, items/25)
		tokens := make([]string, nAuthors)
		limits := map[int64]int64{}
		for i := range nAuthors {
			id, tok := env.User(fmt.Sprintf("author-%d", i), models.RoleAuthor)
			tokens[i] = tok
			limits[id] = dailyBudget
			if i%5 == 4 {
				r := env.Do(http.MethodPut, fmt.Sprintf("/api/admin/users/%d/budget", id), env.AdminToken, map[string]any{"dailyLimit": lowLimit})
				if r.Status != http.StatusOK {
					t.Fatalf("set budget: %d %s", r.Status, r.Body)
				}
				limits[id] = lowLimit
			}
		}

		var (
			mu      sync.Mutex
			written []soakItem
			songs   = map[int][]int64{} // author index → their songs
			errs    []string
			seq     atomic.Int64
		)
		write := func(a int) {
			n := seq.Add(1)
			text := fmt.Sprintf("item %d", n)
			if n%6 == 0 {
				text += " #block"
			}
			mu.Lock()
			own := slices.Clone(songs[a])
			mu.Unlock()
			var path string
			var body map[string]string
			kind := []string{"song", "song", "revision", "comment", "pitch", "pitch"}[rng.IntN(6)]
			if len(own) == 0 && (kind == "revision" || kind == "comment") {
				kind = "song"
			}
			switch kind {
			case "song":
				path, body = "/api/listeners/songs", map[string]string{"title": fmt.Sprintf("Song %d", n), "code": fmt.Sprintf(`s("bd*%d") // %s`, n, text)}
			case "revision":
				path, body = fmt.Sprintf("/api/listeners/songs/%d/revisions", own[rng.IntN(len(own))]),
					map[string]string{"code": fmt.Sprintf(`s("hh*%d") // %s`, n, text), "title": fmt.Sprintf("Take %d", n)}
			case "comment":
				path, body = fmt.Sprintf("/api/listeners/songs/%d/comments", own[rng.IntN(len(own))]), map[string]string{"body": text}
			default:
				path, body = "/api/listeners/pitches", map[string]string{"body": text}
			}
			status, out, err := soakCall(env, http.MethodPost, path, tokens[a], body)
			mu.Lock()
			defer mu.Unlock()
			if err != nil || status != http.StatusCreated {
				errs = append(errs, fmt.Sprintf("POST %s: %d %v %v", path, status, out, err))
				return
			}
			switch kind {
			case "song":
				written = append(written, soakItem{models.KindRevision, idOf(out["revision"])})
				songs[a] = append(songs[a], idOf(out["song"]))
			case "revision":
				written = append(written, soakItem{models.KindRevision, idOf(out["revision"])})
			case "comment":
				written = append(written, soakItem{models.KindComment, idOf(out["comment"])})
			default:
				written = append(written, soakItem{models.KindPitch, idOf(out["pitch"])})
			}
		}

		// quiesce waits until no job is leased: the background runs (inline claims, authors'
		// sweeps) have ended, so the clock can move without a lease running out under a job.
		quiesce := func() {
			t.Helper()
			deadline := time.Now().Add(60 * time.Second)
			for calm := 0; calm < 3; {
				if owedtest.Count(t, store, `SELECT COUNT(*) FROM content_jobs WHERE lease_owner IS NOT NULL`) == 0 {
					calm++
				} else {
					calm = 0
				}
				if time.Now().After(deadline) {
					t.Fatalf("jobs still leased after 60 s")
				}
				time.Sleep(15 * time.Millisecond)
			}
		}
		orphans := `SELECT COUNT(*) FROM content_jobs j WHERE
			(j.kind = 'revision' AND NOT EXISTS (SELECT 1 FROM revisions x WHERE x.id = j.item_id)) OR
			(j.kind = 'comment' AND NOT EXISTS (SELECT 1 FROM comments x WHERE x.id = j.item_id)) OR
			(j.kind = 'pitch' AND NOT EXISTS (SELECT 1 FROM pitches x WHERE x.id = j.item_id))`

		var backup struct {
			path   string
			before []soakItem // items whose writes had answered 201 when the backup began
		}
		// The model is down for two of the write rounds (two hours of clock or more): its breaker
		// opens, and the writes, views and sweeps meanwhile wait for its probes, uncharged.
		const writeRounds = 5
		rounds, swept, pendingSeen := 0, 0, int64(0)
		var outageCalls, outageSpent int64
		for ; ; rounds++ {
			fm.down.Store(rounds == 1 || rounds == 2)
			callsBefore, spentBefore := int64(env.Model.Calls()), owedtest.Count(t, store, `SELECT COALESCE(SUM(spent), 0) FROM budgets`)
			if rounds > 400 {
				t.Fatalf("still %d jobs owed after %d rounds", owedtest.Count(t, store, `SELECT COUNT(*) FROM content_jobs`), rounds)
			}
			var wg sync.WaitGroup
			if rounds < writeRounds {
				// Writes (each claims its item inline), authors' views (each sweeps that author)
				// and the periodic sweep, all at once.
				per := items / writeRounds
				work := make(chan int, per)
				for i := range per {
					work <- i
				}
				close(work)
				for range 4 {
					wg.Go(func() {
						for range work {
							write(rng.IntN(nAuthors))
						}
					})
				}
				wg.Go(func() {
					for range 10 {
						soakCall(env, http.MethodGet, "/api/listeners/mine", tokens[rng.IntN(nAuthors)], nil)
						time.Sleep(5 * time.Millisecond)
					}
				})
			}
			if rounds == 2 && strings.HasPrefix(db, "sqlite:") {
				// `owed backup` of the live database, while the writes, views and sweep of this
				// round go on; checked once the soak is done.
				wg.Go(func() {
					time.Sleep(20 * time.Millisecond)
					mu.Lock()
					backup.before = slices.Clone(written)
					mu.Unlock()
					backup.path = filepath.Join(t.TempDir(), "backup.db")
					if err := models.Backup(ctx, models.Options{URL: db}, backup.path); err != nil {
						mu.Lock()
						errs = append(errs, "backup: "+err.Error())
						mu.Unlock()
					}
				})
			}
			wg.Go(func() {
				n, err := env.App.Content.Sweep(ctx, 0)
				if err != nil {
					mu.Lock()
					errs = append(errs, "sweep: "+err.Error())
					mu.Unlock()
				}
				mu.Lock()
				swept += n
				mu.Unlock()
			})
			wg.Wait()
			quiesce()
			if n, err := env.App.Content.Sweep(ctx, 0); err != nil {
				t.Fatalf("sweep: %v", err)
			} else {
				swept += n
			}
			quiesce()
			if len(errs) > 0 {
				t.Fatalf("%d errors, first: %s", len(errs), errs[0])
			}
			if fm.down.Load() {
				outageCalls += int64(env.Model.Calls()) - callsBefore
				outageSpent += owedtest.Count(t, store, `SELECT COALESCE(SUM(spent), 0) FROM budgets`) - spentBefore
			}

			// Every job still owed has been tried, says why it waits and when it is tried next; one
			// put off by the model's breaker has not been tried, and waits with the why of the
			// failure that opened it.
			now := env.Clock.Now().UnixMilli()
			// (Put off untried, a job has no why of its own: it shows why breaker.)
			if n := owedtest.Count(t, store, `SELECT COUNT(*) FROM content_jobs WHERE (why IS NULL AND attempts > 0) OR due_at <= ?
				OR (attempts < 1 AND why IS NOT NULL AND why NOT IN ('unreachable', 'upstream'))`, now); n != 0 {
				t.Fatalf("round %d: %d pending jobs without a why or a next attempt", rounds, n)
			}
			if n := owedtest.Count(t, store, orphans); n != 0 {
				t.Fatalf("round %d: %d jobs without their item", rounds, n)
			}
			pending := owedtest.Count(t, store, `SELECT COUNT(*) FROM content_jobs`)
			pendingSeen = max(pendingSeen, pending)
			if pending == 0 && rounds >= writeRounds {
				break
			}
			// The authors' own view says the same: each job has a why and a next attempt later.
			tok := tokens[rng.IntN(nAuthors)]
			var mine struct {
				Items []struct {
					Jobs []struct {
						Why           *string
						NextAttemptAt string
					}
				}
			}
			env.Do(http.MethodGet, "/api/listeners/mine", tok, nil).Decode(t, &mine)
			for _, it := range mine.Items {
				for _, j := range it.Jobs {
					at, err := time.Parse(time.RFC3339Nano, j.NextAttemptAt)
					if j.Why == nil || err != nil || !at.After(env.Clock.Now()) {
						t.Fatalf("round %d: an author sees a job without a why or a next attempt: %+v", rounds, j)
					}
				}
			}
			quiesce()

			// Move the clock: an hour (the longest backoff), or to the next job due when that
			// is later (budgets wait for midnight UTC).
			step := time.Hour
			var next int64
			store.RawScan(ctx, &next, `SELECT COALESCE(MIN(due_at), 0) FROM content_jobs`)
			if d := time.UnixMilli(next).Sub(env.Clock.Now()); d > step {
				step = d + time.Millisecond
			}
			env.Clock.Advance(step)
		}

		// Nothing lost, nothing doubled.
		if len(written) < items/writeRounds*writeRounds {
			t.Fatalf("%d items written, want %d", len(written), items/writeRounds*writeRounds)
		}
		allowedRevs := int64(0)
		for _, it := range written {
			var verdicts []models.Verdict
			store.RawScan(ctx, &verdicts, `SELECT verdict FROM screens WHERE kind = ? AND item_id = ?`, it.kind, it.id)
			if len(verdicts) != 1 {
				t.Fatalf("%s %d has %d verdicts", it.kind, it.id, len(verdicts))
			}
			if n := owedtest.Count(t, store, `SELECT COUNT(*) FROM events WHERE event = 'screen' AND kind = ? AND item_id = ? AND outcome IN ('allow', 'block')`, it.kind, it.id); n != 1 {
				t.Fatalf("%s %d has %d verdict events", it.kind, it.id, n)
			}
			if it.kind != models.KindRevision {
				continue
			}
			want := int64(0)
			if verdicts[0] == models.VerdictAllow {
				want, allowedRevs = 1, allowedRevs+1
			}
			if n := owedtest.Count(t, store, `SELECT COUNT(*) FROM scores WHERE revision_id = ?`, it.id); n != want {
				t.Fatalf("revision %d (%s) has %d scores, want %d", it.id, verdicts[0], n, want)
			}
			if n := owedtest.Count(t, store, `SELECT COUNT(*) FROM events WHERE outcome = 'scored' AND item_id = ?`, it.id); n != want {
				t.Fatalf("revision %d has %d score events, want %d", it.id, n, want)
			}
		}
		if n := owedtest.Count(t, store, `SELECT COUNT(*) FROM screens`); n != int64(len(written)) {
			t.Fatalf("%d verdicts for %d items", n, len(written))
		}
		if n := owedtest.Count(t, store, `SELECT COUNT(*) FROM scores`); n != allowedRevs {
			t.Fatalf("%d scores for %d allowed revisions", n, allowedRevs)
		}

		if strings.HasPrefix(db, "sqlite:") {
			checkBackup(t, backup.path, backup.before)
		}

		// Every call charged was asked, and every ask left exactly one event: the budget spent
		// is the calls the events account for (each charged before asking).
		calls := int64(env.Model.Calls())
		spent := owedtest.Count(t, store, `SELECT COALESCE(SUM(spent), 0) FROM budgets`)
		asked := owedtest.Count(t, store, `SELECT COALESCE(SUM(CASE WHEN event = 'screen' THEN 1 ELSE 3 END), 0) FROM events
			WHERE why IS NULL OR why IN ('upstream', 'unreachable', 'unanswered')`)
		if asked != spent {
			t.Fatalf("the events account for %d calls, the budget spent is %d", asked, spent)
		}
		// The model received every call charged, but for asks the client gave up on: a request
		// still dialling or unsent when its deadline (300 ms) passed never reaches the stand-in's
		// handler, which counts a call only once it runs (on a loaded machine it may start later
		// than that), and the runs of a score still in flight are cancelled once one run fails
		// (one answered, so at most two go missing). Such an ask was charged all the same and its
		// event says how it ended: unreachable, or upstream for a score. No call reaches the model
		// uncharged.
		gaveUp := owedtest.Count(t, store, `SELECT COALESCE(SUM(CASE WHEN event = 'screen' THEN 1 WHEN why = 'unreachable' THEN 3 ELSE 2 END), 0)
			FROM events WHERE why = 'unreachable' OR (event = 'score' AND why = 'upstream')`)
		if calls > spent || spent-calls > gaveUp {
			t.Fatalf("budget spent %d, the model received %d calls; at most %d calls of asks that ended unreachable (or upstream, for a score) may not have reached it",
				spent, calls, gaveUp)
		}
		if spent != calls {
			t.Logf("%d charged calls never reached the model: their asks ended unreachable (or upstream)", spent-calls)
		}
		// No author spent past their limit on any day.
		var days []struct {
			UserID int64  `gorm:"column:user_id"`
			Day    string `gorm:"column:day"`
			Spent  int64  `gorm:"column:spent"`
		}
		store.RawScan(ctx, &days, `SELECT user_id, day, spent FROM budgets`)
		refusedDays := 0
		for _, d := range days {
			if d.Spent > limits[d.UserID] {
				t.Fatalf("author %d spent %d on %s, over their limit of %d", d.UserID, d.Spent, d.Day, limits[d.UserID])
			}
			if d.Spent > limits[d.UserID]-3 {
				refusedDays++
			}
		}
		budgetWaits := owedtest.Count(t, store, `SELECT COUNT(*) FROM events WHERE why = 'budget'`)
		pendingEvents := owedtest.Count(t, store, `SELECT COUNT(*) FROM events WHERE outcome = 'pending'`)
		fm.mu.Lock()
		faults := fmt.Sprint(fm.faults)
		fm.mu.Unlock()
		t.Logf("soak: %d items (%d allowed revisions scored) by %d authors in %d rounds over %s of clock, %s wall; "+
			"%d model calls = %d budget spent (in the outage: %d calls, %d spent); %d attempts waited (%d on budget), "+
			"at most %d jobs owed at once; %d author-days at their limit; faults %s",
			len(written), allowedRevs, nAuthors, rounds, env.Clock.Now().Sub(owedtest.Start).Round(time.Minute),
			time.Since(started).Round(time.Millisecond), calls, spent, outageCalls, outageSpent, pendingEvents, budgetWaits,
			pendingSeen, refusedDays, faults)
	})
}

// checkBackup opens a backup taken while owed wrote, as `owed backup` makes it, and checks it
// is whole (PRAGMA integrity_check) and has every item whose write had answered before the
// backup began, with the owed work or verdict each one had.
func checkBackup(t *testing.T, path string, before []soakItem) {
	t.Helper()
	if path == "" || len(before) == 0 {
		t.Fatalf("no backup taken during the soak (%q, %d items before it)", path, len(before))
	}
	copyDB, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer copyDB.Close()
	var check string
	if err := copyDB.QueryRow(`PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
		t.Fatalf("backup integrity_check: %q %v", check, err)
	}
	table := map[models.Kind]string{models.KindRevision: "revisions", models.KindComment: "comments", models.KindPitch: "pitches"}
	for _, it := range before {
		var n int
		q := `SELECT (SELECT COUNT(*) FROM ` + table[it.kind] + ` WHERE id = ?) +
			(SELECT COUNT(*) FROM content_jobs WHERE task = 'screen' AND kind = ? AND item_id = ?) +
			(SELECT COUNT(*) FROM screens WHERE kind = ? AND item_id = ?)`
		if err := copyDB.QueryRow(q, it.id, it.kind, it.id, it.kind, it.id).Scan(&n); err != nil || n != 2 {
			t.Fatalf("backup: %s %d: %d of (item, its screen job or verdict), %v; want both", it.kind, it.id, n, err)
		}
	}
	t.Logf("backup taken mid-soak: integrity ok, all %d items committed before it present", len(before))
}

// faultyCDN serves media answering at random with a fault. It keeps, per path, every answer
// it gave, so the test can tell what each row's final state must be.
type faultyCDN struct {
	srv *httptest.Server
	rng *soakRand
	now func() time.Time

	mu      sync.Mutex
	answers map[string]string   // attempt → the answer the CDN chose
	tries   map[string][]string // path → its attempts, in the order the client made them
	failed  map[string]string   // attempt → where the client saw it end in an error: "trip" (no answer), "body"
	faults  map[string]int
}

// attemptHeader carries an attempt's number from the client (observe) to the CDN (serve).
const attemptHeader = "X-Soak-Attempt"

// observe wraps the engine's transport so the CDN learns what the client itself got: an
// answer whose reading outlived the fetch's deadline (a loaded machine can take that long) is
// a timeout to the engine, whatever the CDN sent.
func (c *faultyCDN) observe(rt http.RoundTripper) http.RoundTripper {
	var n atomic.Int64
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		id := strconv.FormatInt(n.Add(1), 10)
		req = req.Clone(req.Context())
		req.Header.Set(attemptHeader, id)
		c.mu.Lock()
		c.tries[req.URL.Path] = append(c.tries[req.URL.Path], id)
		c.mu.Unlock()
		res, err := rt.RoundTrip(req)
		if err != nil {
			c.fail(id, "trip")
			return nil, err
		}
		res.Body = &observedBody{ReadCloser: res.Body, fail: func() { c.fail(id, "body") }}
		return res, nil
	})
}

func (c *faultyCDN) fail(id, where string) {
	c.mu.Lock()
	c.failed[id] = where
	c.mu.Unlock()
}

// seen is what the client got for path, attempt by attempt: the CDN's answer, or "timeout"
// where the client's attempt ended in an error before its answer was read: before the headers
// (or reaching no handler at all), or, for an image (or garbage), in its body; the other
// answers are known from their headers alone.
func (c *faultyCDN) seen(path string) []string {
	var out []string
	for _, id := range c.tries[path] {
		a, ok := c.answers[id]
		switch {
		case !ok, c.failed[id] == "trip":
			a = "timeout"
		case c.failed[id] == "body" && (a == "ok" || a == "garbage"):
			a = "timeout"
		}
		out = append(out, a)
	}
	return out
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// observedBody tells when reading a body fails (io.EOF is its end, not a failure).
type observedBody struct {
	io.ReadCloser
	fail func()
}

func (b *observedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		b.fail()
	}
	return n, err
}

var cdnFaults = []fault{{"503", 5}, {"404", 3}, {"429", 4}, {"garbage", 3}, {"400", 2}, {"drop", 4}, {"timeout", 2}}

var soakPNG = func() []byte {
	img := image.NewRGBA(image.Rect(0, 0, 40, 30))
	for i := range img.Pix {
		img.Pix[i] = byte(i * 7)
	}
	var b bytes.Buffer
	png.Encode(&b, img)
	return b.Bytes()
}()

func newFaultyCDN(t *testing.T, rng *soakRand, now func() time.Time) *faultyCDN {
	c := &faultyCDN{rng: rng, now: now, answers: map[string]string{}, tries: map[string][]string{}, failed: map[string]string{},
		faults: map[string]int{}}
	c.srv = httptest.NewServer(http.HandlerFunc(c.serve))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *faultyCDN) serve(w http.ResponseWriter, r *http.Request) {
	what := c.rng.pick(cdnFaults)
	c.mu.Lock()
	c.answers[r.Header.Get(attemptHeader)] = what
	c.faults[what]++
	c.mu.Unlock()
	switch what {
	case "503", "404", "400":
		code, _ := strconv.Atoi(what)
		w.WriteHeader(code)
	case "429":
		switch c.rng.IntN(4) {
		case 0:
			w.Header().Set("Retry-After", strconv.Itoa(1+c.rng.IntN(120)))
		case 1:
			w.Header().Set("Retry-After", c.now().Add(time.Duration(1+c.rng.IntN(90))*time.Second).UTC().Format(http.TimeFormat))
		case 2:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprintf(w, `{"message":"You are being rate limited.","retry_after":%.3f,"global":false}`, float64(c.rng.IntN(30_000))/1000)
			return
		default:
			w.Header().Set("Retry-After", "soon") // unreadable: the engine's default wait
		}
		w.WriteHeader(http.StatusTooManyRequests)
	case "garbage":
		w.Header().Set("Content-Type", "image/png")
		w.Write([]byte("\x89PNG\r\n\x1a\nthis is not the rest of a PNG"))
	case "drop":
		abortHandler()
	case "timeout":
		<-r.Context().Done()
	default:
		w.Header().Set("Content-Type", "image/png")
		w.Write(soakPNG)
	}
}

// expected is a row's final state from the answers its URL got: 429s leave it as it was; its
// first other answer decides (an image: cached; no image or a 400: failed; anything
// transient: suspect, and then its one retry decides: cached, failed or unverified).
func expected(kind models.MediaKind, answers []string) (models.MediaState, error) {
	if kind == models.MediaVideo || kind == models.MediaAudio {
		if len(answers) > 0 {
			return "", fmt.Errorf("a %s was fetched", kind)
		}
		return models.MediaSkipped, nil
	}
	var tries []string
	for _, a := range answers {
		if a != "429" {
			tries = append(tries, a)
		}
	}
	class := func(a string) models.MediaState {
		switch a {
		case "ok":
			return models.MediaCached
		case "garbage", "400":
			return models.MediaFailed
		}
		return models.MediaSuspect
	}
	if len(tries) == 0 {
		return "", fmt.Errorf("never fetched past a 429: %v", answers)
	}
	first := class(tries[0])
	if first != models.MediaSuspect {
		if len(tries) != 1 {
			return "", fmt.Errorf("fetched again after a final answer: %v", answers)
		}
		return first, nil
	}
	if len(tries) != 2 {
		return "", fmt.Errorf("a suspect row got %d retries: %v", len(tries)-1, answers)
	}
	if second := class(tries[1]); second != models.MediaSuspect {
		return second, nil
	}
	return models.MediaUnverified, nil
}

// TestSoakBackfillUnderCDNFaults pushes media rows through the bot's routes and runs the
// backfill queue against a CDN that answers at random with 503s, 404s, 429s (Retry-After in
// seconds, as an HTTP date, in a JSON body, or unreadable), garbage, 400s, dropped connections
// and timeouts, on a fake clock moved by the queue's own waits. Jobs paused for making no
// progress (three batches in a row) are started again, as an admin would. At the end every
// row is final and in exactly the state its answers call for (so none was skipped, lost or
// fetched twice), the maintained totals equal a recount, and every cached row's preview is on
// disk.
func TestSoakBackfillUnderCDNFaults(t *testing.T) {
	t.Parallel()
	_, nRows := soakSize()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		env := owedtest.NewEnv(t, db, allowPrivateMedia) // the CDN is on loopback
		rng := newSoakRand(t)
		cdn := newFaultyCDN(t, rng, env.Clock.Now)
		ctx := context.Background()
		store := env.App.Store
		started := time.Now()

		var slept atomic.Int64
		// The engine's gaps and the queue's pauses move the clock instead of waiting.
		stepping := clocktest.Stepping{Fake: env.Clock, OnWait: func(d time.Duration) { slept.Add(int64(d)) }}
		// Fresh connections only: the transport would otherwise retry a GET whose reused
		// connection dropped, a second fetch the engine never asked for. The CDN is on loopback.
		engine, err := media.New(media.Config{PreviewDir: t.TempDir(), Timeout: 300 * time.Millisecond, AllowPrivate: true,
			Outbound: outbound.Options{DisableKeepAlives: true, Observe: cdn.observe}, Clock: stepping})
		if err != nil {
			t.Fatal(err)
		}
		queue := scheduler.NewBackfill(store, engine, stepping, owedtest.Logger(t), nil,
			scheduler.BackfillConfig{Owner: "soak"})

		_, bot := env.User("bot", models.RoleBot)
		kinds := map[string]string{} // url → kind
		chats := max(2, nRows/150)
		for c := range chats {
			for s := range 2 {
				r := env.Do(http.MethodPost, "/api/scrapes", bot, map[string]any{"chatId": fmt.Sprintf("chat-%d", c),
					"guildId": "guild", "backend": []string{"puppet", "slopbot"}[s], "mode": "history"})
				if r.Status != http.StatusCreated {
					t.Fatalf("create scrape: %d %s", r.Status, r.Body)
				}
				scrape := idOf(r.JSON())
				n := nRows / (chats * 2)
				if c == chats-1 && s == 1 {
					n = nRows - (chats*2-1)*(nRows/(chats*2))
				}
				var rows []map[string]any
				for i := range n {
					kind := []string{"image", "image", "image", "image", "image", "image", "image", "gif", "video", "audio"}[rng.IntN(10)]
					u := fmt.Sprintf("%s/m/%d/%d/%d", cdn.srv.URL, c, s, i)
					kinds[u] = kind
					rows = append(rows, map[string]any{"url": u, "kind": kind, "bytes": 1000 + i})
				}
				for i := 0; i < len(rows); i += 1000 {
					r := env.Do(http.MethodPost, fmt.Sprintf("/api/scrapes/%d/media", scrape), bot, map[string]any{"media": rows[i:min(i+1000, len(rows))]})
					if r.Status != http.StatusAccepted {
						t.Fatalf("push: %d %s", r.Status, r.Body)
					}
				}
				if r := env.Do(http.MethodPatch, fmt.Sprintf("/api/scrapes/%d", scrape), bot, map[string]any{"state": "done"}); r.Status != http.StatusOK {
					t.Fatalf("done: %d %s", r.Status, r.Body)
				}
			}
		}
		if r := env.Do(http.MethodPut, "/api/backfill/settings", env.AdminToken, map[string]any{"batchSize": 30, "batchPauseMs": 1000, "auto": false}); r.Status != http.StatusOK {
			t.Fatalf("settings: %d %s", r.Status, r.Body)
		}

		owed := func() int64 {
			return owedtest.Count(t, store, `SELECT COUNT(*) FROM media WHERE state IN ('pending', 'suspect')`)
		}
		restarts, runs := 0, 0
		for owed() > 0 {
			if runs > 200 {
				t.Fatalf("%d rows still owed after %d runs of the queue", owed(), runs)
			}
			// Start every job with rows owed: at first, and again after a stall paused one.
			if r := env.Do(http.MethodPost, "/api/backfill/start", env.AdminToken, nil); r.Status != http.StatusOK {
				t.Fatalf("start: %d %s", r.Status, r.Body)
			}
			if runs > 0 {
				restarts++
			}
			if err := queue.RunQueue(ctx); err != nil {
				t.Fatalf("run queue: %v", err)
			}
			runs++
			checkTotals(t, store)
		}
		if n := owedtest.Count(t, store, `SELECT COUNT(*) FROM backfill_jobs WHERE state <> 'done'`); n != 0 {
			t.Errorf("%d jobs not done with nothing owed", n)
		}

		var rows []struct {
			ID    int64             `gorm:"column:id"`
			URL   string            `gorm:"column:url"`
			Kind  models.MediaKind  `gorm:"column:kind"`
			State models.MediaState `gorm:"column:state"`
		}
		store.RawScan(ctx, &rows, `SELECT id, url, kind, state FROM media ORDER BY id`)
		if len(rows) != len(kinds) {
			t.Fatalf("%d media rows, %d pushed", len(rows), len(kinds))
		}
		cdn.mu.Lock()
		defer cdn.mu.Unlock()
		states := map[models.MediaState]int{}
		fetches := 0
		for _, r := range rows {
			answers := cdn.seen(strings.TrimPrefix(r.URL, cdn.srv.URL))
			fetches += len(answers)
			want, err := expected(r.Kind, answers)
			if err != nil {
				t.Fatalf("row %d (%s): %v", r.ID, r.Kind, err)
			}
			if r.State != want {
				t.Fatalf("row %d (%s) is %s; its answers %v call for %s", r.ID, r.Kind, r.State, answers, want)
			}
			if string(r.Kind) != kinds[r.URL] {
				t.Fatalf("row %d kind %s, pushed %s", r.ID, r.Kind, kinds[r.URL])
			}
			if _, err := os.Stat(engine.PreviewPath(r.ID)); (err == nil) != (r.State == models.MediaCached) {
				t.Fatalf("row %d is %s, its preview file: %v", r.ID, r.State, err)
			}
			states[r.State]++
		}
		t.Logf("soak: %d media rows in %d chats, %d fetches, final %v; %d queue runs, %d restarts after stalls; "+
			"%s of clock slept, %s wall; faults %v",
			len(rows), chats, fetches, states, runs, restarts, time.Duration(slept.Load()).Round(time.Second),
			time.Since(started).Round(time.Millisecond), cdn.faults)
	})
}

// checkTotals compares each scrape's maintained totals with a recount of its rows.
func checkTotals(t *testing.T, s *models.Store) {
	t.Helper()
	type totals struct {
		ScrapeID                                                     int64 `gorm:"column:scrape_id"`
		Pending, Cached, Failed, Suspect, Unverified, Skipped, Total int64
	}
	var kept, counted []totals
	db := s
	db.RawScan(context.Background(), &kept, `SELECT scrape_id, pending, cached, failed, suspect, unverified, skipped, total FROM scrape_totals ORDER BY scrape_id`)
	db.RawScan(context.Background(), &counted, `SELECT s.id AS scrape_id,
		COUNT(CASE WHEN m.state = 'pending' THEN 1 END) AS pending, COUNT(CASE WHEN m.state = 'cached' THEN 1 END) AS cached,
		COUNT(CASE WHEN m.state = 'failed' THEN 1 END) AS failed, COUNT(CASE WHEN m.state = 'suspect' THEN 1 END) AS suspect,
		COUNT(CASE WHEN m.state = 'unverified' THEN 1 END) AS unverified, COUNT(CASE WHEN m.state = 'skipped' THEN 1 END) AS skipped,
		COUNT(m.id) AS total FROM scrapes s LEFT JOIN media m ON m.scrape_id = s.id GROUP BY s.id ORDER BY s.id`)
	if a, b := fmt.Sprintf("%+v", kept), fmt.Sprintf("%+v", counted); a != b {
		t.Fatalf("totals drifted:\n kept    %s\n counted %s", a, b)
	}
}
