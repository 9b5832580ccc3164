package api_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// Who may call a route (SPEC §3).
var (
	anyone  = everyRole
	signed  = []role{asAuthor, asOther, asBot, asAdmin}
	authors = []role{asAuthor, asOther}
	bots    = []role{asBot, asAdmin}
	admins  = []role{asAdmin}
)

// routeCase is one route of the authorisation matrix: who may call it, and a request that an
// allowed caller makes successfully. Items the request acts on belong to asAuthor.
type routeCase struct {
	roles []role
	// own: the route acts on asAuthor's own item; another author is refused as if it were
	// missing (404, the same body) and
	// nothing changes.
	own bool
	// ok lists the statuses of an allowed call.
	ok []int
	// req builds the request (its fixtures made fresh each time): the path and a JSON body.
	req func(w *world) (string, any)
}

func static(path string, body any) func(*world) (string, any) {
	return func(*world) (string, any) { return path, body }
}

// routeMatrix has an entry for every route the app registers, keyed "METHOD /path" as Echo
// has it. TestEveryRouteIsInTheMatrix fails for a route without one.
var routeMatrix = map[string]routeCase{
	"GET /api/openapi.json": {anyone, false, []int{200}, static("/api/openapi.json", nil)},
	"POST /api/session": {anyone, false, []int{204}, func(w *world) (string, any) {
		return "/api/session", map[string]string{"token": w.tok[asAuthor]}
	}},
	"GET /api/session":    {signed, false, []int{200}, static("/api/session", nil)},
	"DELETE /api/session": {anyone, false, []int{204}, static("/api/session", nil)},

	"POST /api/listeners/songs": {authors, false, []int{201}, static("/api/listeners/songs", map[string]string{"title": "Tide", "code": `s("bd")`})},
	"POST /api/listeners/songs/:id/revisions": {authors, true, []int{201}, func(w *world) (string, any) {
		song, _ := w.song(asAuthor, models.VerdictAllow)
		return fmt.Sprintf("/api/listeners/songs/%d/revisions", song), map[string]string{"code": `s("hh*4")`}
	}},
	// Anyone may comment on a public song: another author's comment is not refused.
	"POST /api/listeners/songs/:id/comments": {authors, false, []int{201}, func(w *world) (string, any) {
		song, _ := w.song(asAuthor, models.VerdictAllow)
		return fmt.Sprintf("/api/listeners/songs/%d/comments", song), map[string]string{"body": "lovely"}
	}},
	"POST /api/listeners/pitches": {authors, false, []int{201}, static("/api/listeners/pitches", map[string]string{"body": "hear me out"})},
	"DELETE /api/listeners/songs/:id": {authors, true, []int{204}, func(w *world) (string, any) {
		song, _ := w.song(asAuthor, models.VerdictAllow)
		return fmt.Sprintf("/api/listeners/songs/%d", song), nil
	}},
	"DELETE /api/listeners/revisions/:id": {authors, true, []int{204}, func(w *world) (string, any) {
		_, rev := w.song(asAuthor, "")
		return fmt.Sprintf("/api/listeners/revisions/%d", rev), nil
	}},
	"DELETE /api/listeners/comments/:id": {authors, true, []int{204}, func(w *world) (string, any) {
		song, _ := w.song(asAuthor, models.VerdictAllow)
		return fmt.Sprintf("/api/listeners/comments/%d", w.comment(asAuthor, song, "")), nil
	}},
	"DELETE /api/listeners/pitches/:id": {authors, true, []int{204}, func(w *world) (string, any) {
		return fmt.Sprintf("/api/listeners/pitches/%d", w.pitch(asAuthor, models.VerdictBlock)), nil
	}},
	"GET /api/listeners/mine": {authors, false, []int{200}, static("/api/listeners/mine", nil)},
	// A stream ends after its first event once the server is shutting down.
	"GET /api/listeners/mine/stream": {authors, false, []int{200}, func(w *world) (string, any) {
		w.env.App.API.CloseStreams()
		return "/api/listeners/mine/stream", nil
	}},

	"POST /api/listeners/mine/ticket": {authors, false, []int{200}, static("/api/listeners/mine/ticket", nil)},

	"GET /api/songs": {anyone, false, []int{200}, static("/api/songs", nil)},
	"GET /api/songs/:id": {anyone, false, []int{200}, func(w *world) (string, any) {
		song, _ := w.song(asAuthor, models.VerdictAllow)
		return fmt.Sprintf("/api/songs/%d", song), nil
	}},
	"GET /api/pitches": {anyone, false, []int{200}, static("/api/pitches", nil)},

	"POST /api/admin/users": {admins, false, []int{201}, func(w *world) (string, any) {
		return "/api/admin/users", map[string]string{"name": "cy-" + models.NewToken()[5:15], "role": "author"} // names are unique
	}},
	"PUT /api/admin/users/:id/budget": {admins, false, []int{200}, func(w *world) (string, any) {
		return fmt.Sprintf("/api/admin/users/%d/budget", w.uid[asAuthor]), map[string]any{"dailyLimit": 7}
	}},
	"GET /api/admin/budgets": {admins, false, []int{200}, static("/api/admin/budgets", nil)},
	"GET /api/admin/users":   {admins, false, []int{200}, static("/api/admin/users", nil)},
	"POST /api/admin/users/:id/token": {admins, false, []int{200}, func(w *world) (string, any) {
		return fmt.Sprintf("/api/admin/users/%d/token", w.freshUser()), nil
	}},
	"PATCH /api/admin/users/:id": {admins, false, []int{200}, func(w *world) (string, any) {
		return fmt.Sprintf("/api/admin/users/%d", w.freshUser()), map[string]any{"disabled": true}
	}},
	"GET /api/admin/jobs": {admins, false, []int{200}, static("/api/admin/jobs", nil)},
	"GET /api/admin/jobs/:id": {admins, false, []int{200}, func(w *world) (string, any) {
		p := w.pitch(asAuthor, "")
		return fmt.Sprintf("/api/admin/jobs/%d", w.job(models.TaskScreen, models.KindPitch, p).ID), nil
	}},
	"POST /api/admin/jobs/:id/retry": {admins, false, []int{200}, func(w *world) (string, any) {
		p := w.pitch(asAuthor, "")
		return fmt.Sprintf("/api/admin/jobs/%d/retry", w.job(models.TaskScreen, models.KindPitch, p).ID), nil
	}},
	"POST /api/admin/jobs/retry": {admins, false, []int{200}, static("/api/admin/jobs/retry", map[string]any{"why": "upstream"})},
	"GET /api/admin/events":      {admins, false, []int{200}, static("/api/admin/events", nil)},
	"GET /api/admin/holds":       {admins, false, []int{200}, static("/api/admin/holds", nil)},
	// Shadow models (shadow.go): the matrix's owed has no candidate, so a promotion is refused
	// (409 no_candidate) and so is a rollback (not_promoted); shadow_test.go makes both succeed.
	"GET /api/admin/shadow":           {admins, false, []int{200}, static("/api/admin/shadow", nil)},
	"POST /api/admin/shadow/promote":  {admins, false, []int{409}, static("/api/admin/shadow/promote", nil)},
	"POST /api/admin/shadow/rollback": {admins, false, []int{409}, static("/api/admin/shadow/rollback", nil)},
	"PUT /api/admin/holds":            {admins, false, []int{200}, static("/api/admin/holds", map[string]any{"screen": false})},
	"GET /api/admin/items/:kind/:id": {admins, false, []int{200}, func(w *world) (string, any) {
		return fmt.Sprintf("/api/admin/items/pitch/%d", w.pitch(asAuthor, models.VerdictBlock)), nil
	}},
	"POST /api/admin/items/:kind/:id/verdict": {admins, false, []int{200}, func(w *world) (string, any) {
		return fmt.Sprintf("/api/admin/items/pitch/%d/verdict", w.pitch(asAuthor, "")), map[string]any{"verdict": "allow", "note": "fine"}
	}},
	// The review queue (review.go).
	"GET /api/admin/review":          {admins, false, []int{200}, static("/api/admin/review", nil)},
	"GET /api/admin/review/measures": {admins, false, []int{200}, static("/api/admin/review/measures", nil)},
	"POST /api/admin/review/:kind/:id/claim": {admins, false, []int{200}, func(w *world) (string, any) {
		p := w.pitch(asAuthor, models.VerdictBlock)
		if _, err := w.store().FileAppeal(context.Background(), models.KindPitch, p, w.uid[asAuthor], nil); err != nil {
			w.t.Fatal(err)
		}
		return fmt.Sprintf("/api/admin/review/pitch/%d/claim", p), nil
	}},
	"DELETE /api/admin/review/:kind/:id/claim": {admins, false, []int{204}, func(w *world) (string, any) {
		p := w.pitch(asAuthor, models.VerdictBlock)
		if _, err := w.store().FileAppeal(context.Background(), models.KindPitch, p, w.uid[asAuthor], nil); err != nil {
			w.t.Fatal(err)
		}
		return fmt.Sprintf("/api/admin/review/pitch/%d/claim", p), nil
	}},
	"POST /api/listeners/items/:kind/:id/appeal": {authors, true, []int{201}, func(w *world) (string, any) {
		return fmt.Sprintf("/api/listeners/items/pitch/%d/appeal", w.pitch(asAuthor, models.VerdictBlock)), map[string]any{"note": "please"}
	}},
	"GET /api/admin/stats":                  {admins, false, []int{200}, static("/api/admin/stats", nil)},
	"GET /api/admin/model":                  {admins, false, []int{200}, static("/api/admin/model", nil)},
	"POST /api/admin/model/probe":           {admins, false, []int{200, 429}, static("/api/admin/model/probe", nil)},
	"GET /api/admin/audit":                  {admins, false, []int{200}, static("/api/admin/audit", nil)},
	"POST /api/admin/backfill/walk/release": {admins, false, []int{200}, static("/api/admin/backfill/walk/release", nil)},
	"GET /api/admin/plugins":                {admins, false, []int{200}, static("/api/admin/plugins", nil)},

	// Shadow models and drift: the anchor set.
	"GET /api/admin/anchors": {admins, false, []int{200}, static("/api/admin/anchors", nil)},
	"POST /api/admin/anchors": {admins, false, []int{201}, func(w *world) (string, any) {
		return "/api/admin/anchors", map[string]any{"kind": "pitch", "itemId": w.pitch(asAuthor, models.VerdictAllow), "verdict": "allow"}
	}},
	"DELETE /api/admin/anchors/:id": {admins, false, []int{204}, func(w *world) (string, any) {
		block := models.VerdictBlock
		a, err := w.store().AddAnchor(context.Background(), models.Anchor{Kind: models.KindPitch, ItemID: w.pitch(asAuthor, ""), Verdict: &block})
		if err != nil {
			w.t.Fatal(err)
		}
		return fmt.Sprintf("/api/admin/anchors/%d", a.ID), nil
	}},

	// Webhook subscriptions and their deliveries (admin).
	"POST /api/admin/webhooks": {admins, false, []int{201}, static("/api/admin/webhooks", webhookBody())},
	"GET /api/admin/webhooks":  {admins, false, []int{200}, static("/api/admin/webhooks", nil)},
	"PATCH /api/admin/webhooks/:id": {admins, false, []int{200}, func(w *world) (string, any) {
		return fmt.Sprintf("/api/admin/webhooks/%d", w.webhook()), map[string]any{"active": false}
	}},
	"DELETE /api/admin/webhooks/:id": {admins, false, []int{204}, func(w *world) (string, any) {
		return fmt.Sprintf("/api/admin/webhooks/%d", w.webhook()), nil
	}},
	"POST /api/admin/webhooks/:id/secret": {admins, false, []int{200}, func(w *world) (string, any) {
		return fmt.Sprintf("/api/admin/webhooks/%d/secret", w.webhook()), nil
	}},
	"GET /api/admin/webhooks/:id/deliveries": {admins, false, []int{200}, func(w *world) (string, any) {
		return fmt.Sprintf("/api/admin/webhooks/%d/deliveries", w.webhook()), nil
	}},
	"GET /api/admin/deliveries/:id": {admins, false, []int{200}, func(w *world) (string, any) {
		return fmt.Sprintf("/api/admin/deliveries/%d", w.delivery()), nil
	}},
	"POST /api/admin/deliveries/:id/redeliver": {admins, false, []int{200}, func(w *world) (string, any) {
		return fmt.Sprintf("/api/admin/deliveries/%d/redeliver", w.delivery()), nil
	}},
	"GET /api/admin/webhooks/deliveries/:id": {admins, false, []int{200}, func(w *world) (string, any) {
		return fmt.Sprintf("/api/admin/webhooks/deliveries/%d", w.delivery()), nil
	}},
	"POST /api/admin/webhooks/deliveries/:id/redeliver": {admins, false, []int{200}, func(w *world) (string, any) {
		return fmt.Sprintf("/api/admin/webhooks/deliveries/%d/redeliver", w.delivery()), nil
	}},

	// The bot's scrapes and media (bot, admin) and the backfill controls (admin).
	"POST /api/scrapes": {bots, false, []int{201}, func(w *world) (string, any) {
		return "/api/scrapes", scrapeBody()
	}},
	"GET /api/scrapes": {bots, false, []int{200}, static("/api/scrapes", nil)},
	"GET /api/scrapes/:id": {bots, false, []int{200}, func(w *world) (string, any) {
		return fmt.Sprintf("/api/scrapes/%d", w.scrape()), nil
	}},
	"PATCH /api/scrapes/:id": {bots, false, []int{200}, func(w *world) (string, any) {
		return fmt.Sprintf("/api/scrapes/%d", w.scrape()), map[string]string{"state": "paused"}
	}},
	"DELETE /api/scrapes/:id": {bots, false, []int{200, 202, 204}, func(w *world) (string, any) {
		return fmt.Sprintf("/api/scrapes/%d", w.scrape()), nil
	}},
	"POST /api/scrapes/:id/media": {bots, false, []int{202}, func(w *world) (string, any) {
		return fmt.Sprintf("/api/scrapes/%d/media", w.scrape()), mediaBody(2)
	}},
	"GET /api/scrapes/:id/media": {bots, false, []int{200}, func(w *world) (string, any) {
		return fmt.Sprintf("/api/scrapes/%d/media", w.scrape()), nil
	}},
	// A row whose preview is not cached yet: an allowed caller is told it is not there.
	"GET /api/media/:id/preview": {bots, false, []int{404}, func(w *world) (string, any) {
		return fmt.Sprintf("/api/media/%d/preview", w.media()), nil
	}},
	"GET /api/backfill":          {admins, false, []int{200}, static("/api/backfill", nil)},
	"POST /api/backfill/start":   {admins, false, []int{200}, static("/api/backfill/start", map[string]any{})},
	"POST /api/backfill/pause":   {admins, false, []int{200}, static("/api/backfill/pause", map[string]any{})},
	"PUT /api/backfill/settings": {admins, false, []int{200}, static("/api/backfill/settings", map[string]any{"batchSize": 25, "batchPauseMs": 0, "auto": false})},
	"GET /api/backfill/settings": {admins, false, []int{200}, static("/api/backfill/settings", nil)},

	// Operations and the SPA.
	"GET /healthz": {anyone, false, []int{200}, static("/healthz", nil)},
	"GET /readyz":  {anyone, false, []int{200}, static("/readyz", nil)},
	"GET /metrics": {anyone, false, []int{200}, static("/metrics", nil)},
	"GET /admin":   {anyone, false, []int{200}, static("/admin", nil)},
	"GET /admin/*": {anyone, false, []int{200}, static("/admin/", nil)},
	"GET /":        {anyone, false, []int{200}, static("/", nil)}, // a redirect to /admin/, followed
}

// freshUser makes an author through the store, for routes that change a user.
func (w *world) freshUser() int64 {
	w.t.Helper()
	u, _, err := w.store().CreateUser(context.Background(), "fresh-"+models.NewToken()[5:15], models.RoleAuthor)
	if err != nil {
		w.t.Fatal(err)
	}
	return u.ID
}

func webhookBody() map[string]any {
	return map[string]any{"url": "https://93.184.215.14/owed", "events": []string{"*"}}
}

// webhook subscribes a URL through the API and returns its id.
func (w *world) webhook() int64 {
	w.t.Helper()
	return num(obj(w.created("/api/admin/webhooks", asAdmin, webhookBody())["webhook"])["id"])
}

// delivery makes a webhook with one pending delivery and returns the delivery's id.
func (w *world) delivery() int64 {
	w.t.Helper()
	id := w.webhook()
	ctx := context.Background()
	if err := w.store().EnqueueWebhook(ctx, models.EventBackfillFinished, map[string]any{"chatId": "c"}); err != nil {
		w.t.Fatal(err)
	}
	ds, err := w.store().ListDeliveries(ctx, id, "", 0, 1)
	if err != nil || len(ds) != 1 {
		w.t.Fatalf("deliveries of webhook %d: %v %v", id, ds, err)
	}
	return ds[0].ID
}

func scrapeBody() map[string]any {
	return map[string]any{"chatId": "chat-1", "guildId": "guild-1", "backend": "puppet", "mode": "history"}
}

func mediaBody(n int) map[string]any {
	var rows []any
	for i := range n {
		rows = append(rows, map[string]any{"url": fmt.Sprintf("https://cdn.example/%d.png", i), "kind": "image", "bytes": 100})
	}
	return map[string]any{"media": rows}
}

// scrape makes a scrape through the API and returns its id.
func (w *world) scrape() int64 {
	w.t.Helper()
	return num(w.created("/api/scrapes", asBot, scrapeBody())["id"])
}

// media pushes one media row to a new scrape and returns the row's id.
func (w *world) media() int64 {
	w.t.Helper()
	id := w.scrape()
	r := w.do(http.MethodPost, fmt.Sprintf("/api/scrapes/%d/media", id), asBot, mediaBody(1))
	if r.Status != http.StatusAccepted {
		w.t.Fatalf("push media: %d %s", r.Status, r.Body)
	}
	r = w.do(http.MethodGet, fmt.Sprintf("/api/scrapes/%d/media", id), asBot, nil)
	rows := list(r.JSON()["media"])
	if len(rows) != 1 {
		w.t.Fatalf("media of scrape %d: %s", id, r.Body)
	}
	return num(obj(rows[0])["id"])
}

// appRoutes lists the routes the app registers, as "METHOD /path".
func appRoutes(env *owedtest.Env) []string {
	var out []string
	for _, r := range env.App.Echo.Routes() {
		if r.Method == echo.RouteNotFound {
			continue
		}
		out = append(out, r.Method+" "+r.Path)
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// TestEveryRouteIsInTheMatrix keeps the matrix true: a new route without an entry fails here,
// and so does an entry for a route that does not exist (a stale or misspelt one).
func TestEveryRouteIsInTheMatrix(t *testing.T) {
	t.Parallel()
	env := owedtest.NewEnv(t, "sqlite:"+t.TempDir()+"/owed.db")
	routes := appRoutes(env)
	for _, r := range routes {
		if _, ok := routeMatrix[r]; !ok {
			t.Errorf("route %s has no entry in routeMatrix: say who may call it", r)
		}
	}
	for k := range routeMatrix {
		if !slices.Contains(routes, k) {
			t.Errorf("routeMatrix has %s, which is not routed", k)
		}
	}
}

// TestAuthorisationByRole calls every route as every kind of caller: the anonymous get 401,
// callers without the role 403, another author 404 on the author's own items (the very answer
// a missing item gets), and none
// of those changes anything; allowed callers succeed.
func TestAuthorisationByRole(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db).quiet()
		for _, route := range appRoutes(w.env) {
			rc, ok := routeMatrix[route]
			if !ok {
				continue // TestEveryRouteIsInTheMatrix reports it
			}
			method, _, _ := strings.Cut(route, " ")
			for _, as := range everyRole {
				t.Run(route+" as "+string(as), func(t *testing.T) {
					w.t = t
					path, body := rc.req(w)
					before := w.snapshot()
					r := w.do(method, path, as, body)
					allowed := slices.Contains(rc.roles, as)
					switch {
					case !allowed && as == asAnon:
						checkError(t, r, http.StatusUnauthorized, "unauthorized", "")
						w.unchanged(t, before, "a refused call")
					case !allowed:
						checkError(t, r, http.StatusForbidden, "forbidden", "")
						w.unchanged(t, before, "a refused call")
					case rc.own && as == asOther:
						// Exactly as a missing item answers (issue 12, row 6): no existence oracle.
						checkError(t, r, http.StatusNotFound, "not_found", "")
						missing := w.do(method, missingID(path), as, body)
						if missing.Status != r.Status || string(missing.Body) != string(r.Body) {
							t.Errorf("another author's item: %d %s; a missing one: %d %s", r.Status, r.Body, missing.Status, missing.Body)
						}
						w.unchanged(t, before, "another author's call")
					default:
						if !slices.Contains(rc.ok, r.Status) {
							t.Errorf("%s %s: %d %s, want %v", method, path, r.Status, r.Body, rc.ok)
						}
					}
				})
			}
		}
	})
}

// missingID is path with its (first) id replaced by one that no row has.
func missingID(path string) string {
	return regexp.MustCompile(`/\d+`).ReplaceAllLiteralString(path, "/987654321")
}

// A bad token is refused even on routes anyone may call: a client with a stale token learns
// so at once instead of silently being anonymous.
func TestBadTokenIsRefused(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "sqlite:"+t.TempDir()+"/owed.db")
	for _, h := range []string{"Bearer nope", "Basic YTpi", "Bearer ", "nope"} {
		r := w.env.Do(http.MethodGet, "/api/songs", "", nil, "Authorization", h)
		checkError(t, r, http.StatusUnauthorized, "unauthorized", "")
	}
}
