package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/owed/owed/models"
)

// route is one endpoint: its handler, who may call it, and what the OpenAPI document says of it.
type route struct {
	method, path string
	handler      echo.HandlerFunc
	roles        []models.Role // nil: anyone, signed in or not
	summary      string
	request      string // the request body's schema in the OpenAPI components, if any
	response     string // the success answer's schema, if any
	status       int    // the success status
}

var (
	anyone  []models.Role
	authors = []models.Role{models.RoleAuthor}
	admins  = []models.Role{models.RoleAdmin}
	bots    = []models.Role{models.RoleBot, models.RoleAdmin}
	signed  = models.Roles
)

// routes lists every route under /api. Register mounts them and the OpenAPI document is made
// from them, so the two cannot drift apart.
func (a *API) routes() []route {
	rs := []route{
		{http.MethodGet, "/api/openapi.json", a.openAPI, anyone, "This document", "", "", 200},
		{http.MethodPost, "/api/session", a.signIn, anyone, "Exchange a token for a browser session cookie", "SessionRequest", "", 204},
		{http.MethodGet, "/api/session", a.session, signed, "Who is signed in", "", "Session", 200},
		{http.MethodDelete, "/api/session", a.signOut, anyone, "Sign the browser session out", "", "", 204},

		{http.MethodPost, "/api/listeners/songs", a.createSong, authors, "Publish a song; its first revision is screened inline", "SongRequest", "SongCreated", 201},
		{http.MethodPost, "/api/listeners/songs/:id/revisions", a.createRevision, authors, "Add a revision to your song; screened inline", "RevisionRequest", "RevisionCreated", 201},
		{http.MethodPost, "/api/listeners/songs/:id/comments", a.createComment, authors, "Comment on a song; screened inline", "BodyRequest", "CommentCreated", 201},
		{http.MethodPost, "/api/listeners/pitches", a.createPitch, authors, "Pitch; screened inline", "BodyRequest", "PitchCreated", 201},
		{http.MethodDelete, "/api/listeners/songs/:id", a.deleteItem("song"), authors, "Delete your song, its revisions and comments, and their owed jobs", "", "", 204},
		{http.MethodDelete, "/api/listeners/revisions/:id", a.deleteItem(models.KindRevision), authors, "Delete your revision and its owed jobs", "", "", 204},
		{http.MethodDelete, "/api/listeners/comments/:id", a.deleteItem(models.KindComment), authors, "Delete your comment and its owed jobs", "", "", 204},
		{http.MethodDelete, "/api/listeners/pitches/:id", a.deleteItem(models.KindPitch), authors, "Delete your pitch and its owed jobs", "", "", 204},
		{http.MethodGet, "/api/listeners/mine", a.mine, authors, "Your items (newest first across kinds, filtered, paged), their verdicts, scores, owed jobs and budget; runs your due jobs in the background; with wait=N and a matching If-None-Match, a long poll", "", "Mine", 200},
		{http.MethodGet, "/api/listeners/mine/stream", a.mineStream, authors, "Your view as server-sent events: event mine (id: the ETag, data: the view) at once unless Last-Event-ID is the current tag, then on every change; a ': ping' comment every 15 s", "", "", 200},

		{http.MethodGet, "/api/songs", a.listSongs, anyone, "Public songs, by art or newest", "", "SongList", 200},
		{http.MethodGet, "/api/songs/:id", a.getSong, anyone, "A public song with its allowed revisions and comments", "", "SongDetail", 200},
		{http.MethodGet, "/api/pitches", a.listPitches, anyone, "Public pitches, newest first", "", "PitchList", 200},

		{http.MethodPost, "/api/admin/users", a.createUser, admins, "Create a user; the token is shown once", "UserRequest", "UserCreated", 201},
		{http.MethodGet, "/api/admin/users", a.listUsers, admins, "Every user, with whether they are disabled", "", "UserList", 200},
		{http.MethodPost, "/api/admin/users/:id/token", a.rotateToken, admins, "Give a user a new token, shown once; the old one and the user's sessions stop working at once", "", "UserCreated", 200},
		{http.MethodPatch, "/api/admin/users/:id", a.patchUser, admins, "Disable (lock out) or enable a user; their owed work stays; the last enabled admin cannot be disabled (409)", "UserPatch", "UserAdmin", 200},
		{http.MethodPut, "/api/admin/users/:id/budget", a.setBudget, admins, "Set a user's daily budget (null: the default)", "BudgetRequest", "Budget", 200},
		{http.MethodGet, "/api/admin/budgets", a.listBudgets, admins, "Each author's spend today and limit", "", "BudgetList", 200},
		{http.MethodGet, "/api/admin/jobs", a.listJobs, admins, "Owed jobs, filtered", "", "JobList", 200},
		{http.MethodGet, "/api/admin/jobs/:id", a.getJob, admins, "One owed job, its item's title, its author, and every attempt with its error", "", "JobDetail", 200},
		{http.MethodPost, "/api/admin/jobs/:id/retry", a.retryJob, admins, "Make one job due now (409 while it runs, or while the budget it waits for cannot cover it); not an attempt by itself", "", "JobDetail", 200},
		{http.MethodPost, "/api/admin/jobs/retry", a.retryJobs, admins, "Make every job the filter selects due now, except running ones and those whose budget still cannot cover them", "JobFilter", "Retried", 200},
		{http.MethodGet, "/api/admin/holds", a.getHolds, admins, "What is held: screens, scores, webhook deliveries", "", "Holds", 200},
		{http.MethodPut, "/api/admin/holds", a.putHolds, admins, "Hold or lift work: held work is claimed by no replica, neither charged nor asked; a field left out keeps its value", "HoldsRequest", "Holds", 200},
		{http.MethodPost, "/api/admin/items/:kind/:id/verdict", a.decide, admins, "Decide an item's verdict by hand: settles its screen job as the admin's verdict", "VerdictRequest", "Screen", 200},
		{http.MethodGet, "/api/admin/events", a.listEvents, admins, "Attempt events, newest first", "", "EventList", 200},
		{http.MethodGet, "/api/admin/stats", a.stats, admins, "The overview's summary", "", "Stats", 200},
		{http.MethodGet, "/api/admin/model", a.modelState, admins, "The model's breaker (closed, open, probing) and this process's calls in flight and their cap", "", "ModelState", 200},
		{http.MethodGet, "/api/admin/plugins", a.plugins, admins, "The admin SPA's plugin manifest", "", "Plugins", 200},

		{http.MethodPost, "/api/admin/webhooks", a.createWebhook, admins, "Subscribe a URL to events; the signing secret is shown once", "WebhookRequest", "WebhookCreated", 201},
		{http.MethodGet, "/api/admin/webhooks", a.listWebhooks, admins, "Webhook subscriptions", "", "WebhookList", 200},
		{http.MethodPatch, "/api/admin/webhooks/:id", a.updateWebhook, admins, "Enable or disable a webhook; disabling cancels its pending deliveries", "WebhookUpdate", "WebhookAnswer", 200},
		{http.MethodDelete, "/api/admin/webhooks/:id", a.deleteWebhook, admins, "Delete a webhook with its deliveries", "", "", 204},
		{http.MethodGet, "/api/admin/webhooks/:id/deliveries", a.listDeliveries, admins, "A webhook's deliveries, newest first, each with its latest attempts", "", "DeliveryList", 200},
		{http.MethodGet, "/api/admin/webhooks/deliveries/:id", a.getDelivery, admins, "One delivery with its payload and every attempt", "", "DeliveryAnswer", 200},
		{http.MethodPost, "/api/admin/webhooks/deliveries/:id/redeliver", a.redeliver, admins, "Make a delivery due now, pending again, with the same webhook-id", "", "DeliveryAnswer", 200},

		{http.MethodPost, "/api/scrapes", a.createScrape, bots, "Record a scrape the bot starts: active, it holds the walk lock", "ScrapeRequest", "Scrape", 201},
		{http.MethodGet, "/api/scrapes", a.listScrapes, bots, "Scrapes with their counts (deleted ones leave the list)", "", "ScrapeList", 200},
		{http.MethodGet, "/api/scrapes/:id", a.getScrape, bots, "One scrape with its counts", "", "Scrape", 200},
		{http.MethodPatch, "/api/scrapes/:id", a.patchScrape, bots, "Change a scrape's state (active, paused, done, failed) or downloaded count", "ScrapePatch", "Scrape", 200},
		{http.MethodDelete, "/api/scrapes/:id", a.deleteScrape, bots, "Delete a scrape: pending-delete now, its previews and rows go in the background", "", "Scrape", 202},
		{http.MethodPost, "/api/scrapes/:id/media", a.pushMedia, bots, "Push 1 to 1000 media rows (all or none; http(s) URLs on public addresses unless OWED_MEDIA_ALLOW_PRIVATE); refreshes the walk lock", "MediaPush", "Accepted", 202},
		{http.MethodGet, "/api/scrapes/:id/media", a.listScrapeMedia, bots, "A scrape's media rows, optionally in one preview state", "", "MediaList", 200},
		{http.MethodGet, "/api/media/:id/preview", a.mediaPreview, bots, "The cached JPEG preview of a media row (404 until cached)", "", "", 200},
		{http.MethodGet, "/api/backfill", a.getBackfill, admins, "The backfill queue: jobs, members, rates, ETAs, totals, settings, rate limit", "", "BackfillStatus", 200},
		{http.MethodPost, "/api/backfill/start", a.startBackfill, admins, "Start every job with pending rows, smallest first, or one chat's; the body is optional", "BackfillTarget", "BackfillStatus", 200},
		{http.MethodPost, "/api/backfill/pause", a.pauseBackfill, admins, "Pause every job, or one chat's, after its current batch; the body is optional", "BackfillTarget", "BackfillStatus", 200},
		{http.MethodGet, "/api/backfill/settings", a.getBackfillSettings, admins, "The backfill queue's settings", "", "BackfillSettings", 200},
		{http.MethodPut, "/api/backfill/settings", a.putBackfillSettings, admins, "Replace the backfill settings (batchSize 1-500, batchPauseMs 0-3600000)", "BackfillSettings", "BackfillStatus", 200},
	}
	return rs
}

// Register mounts the API, the health and metrics endpoints on e.
func (a *API) Register(e *echo.Echo) {
	g := e.Group("", a.authenticate, a.writeLimit())
	for _, r := range a.routes() {
		var mw []echo.MiddlewareFunc
		if r.roles != nil {
			mw = append(mw, allow(r.roles...))
		}
		if params := queryParams[r.method+" "+r.path]; params != nil {
			mw = append(mw, onceEach(params))
		}
		g.Add(r.method, r.path, r.handler, mw...)
	}
	e.GET("/healthz", a.healthz)
	e.GET("/readyz", a.readyz)
}

// onceEach refuses a documented query parameter given more than once (?task=a&task=b): which
// of the values would count is a guess a filter must not make.
func onceEach(params []string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			q := c.QueryParams()
			for _, p := range params {
				if len(q[p]) > 1 {
					return invalid(p, p+" must be given once")
				}
			}
			return next(c)
		}
	}
}
