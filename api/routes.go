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
	request      any // a value of the request body's type, if the route reads one
	response     any // a value of the success answer's type, if it is JSON
	status       int // the success status
	query        any // a value of the query parameters' struct type (query tags), if any
}

var (
	anyone  []models.Role
	authors = []models.Role{models.RoleAuthor}
	admins  = []models.Role{models.RoleAdmin}
	bots    = []models.Role{models.RoleBot, models.RoleAdmin}
	signed  = models.Roles
)

// routes lists every route under /api, for Register and the OpenAPI document alike.
func (a *API) routes() []route {
	rs := []route{
		{http.MethodGet, "/api/openapi.json", a.openAPI, anyone, "This document", nil, map[string]any{}, 200, nil},
		{http.MethodPost, "/api/session", a.signIn, anyone, "Exchange a token for a browser session cookie", sessionRequest{}, nil, 204, nil},
		{http.MethodGet, "/api/session", a.session, signed, "Who is signed in", nil, sessionJSON{}, 200, nil},
		{http.MethodDelete, "/api/session", a.signOut, anyone, "Sign the browser session out", nil, nil, 204, nil},

		{http.MethodPost, "/api/listeners/songs", a.createSong, authors, "Publish a song; its first revision is screened inline", songRequest{}, songCreatedJSON{}, 201, nil},
		{http.MethodPost, "/api/listeners/songs/:id/revisions", a.createRevision, authors, "Add a revision to your song; screened inline", revisionRequest{}, revisionCreatedJSON{}, 201, nil},
		{http.MethodPost, "/api/listeners/songs/:id/comments", a.createComment, authors, "Comment on a song; screened inline", bodyRequest{}, commentCreatedJSON{}, 201, nil},
		{http.MethodPost, "/api/listeners/pitches", a.createPitch, authors, "Pitch; screened inline", bodyRequest{}, pitchCreatedJSON{}, 201, nil},
		{http.MethodDelete, "/api/listeners/songs/:id", a.deleteItem("song"), authors, "Delete your song, its revisions and comments, and their owed jobs", nil, nil, 204, nil},
		{http.MethodDelete, "/api/listeners/revisions/:id", a.deleteItem(models.KindRevision), authors, "Delete your revision and its owed jobs", nil, nil, 204, nil},
		{http.MethodDelete, "/api/listeners/comments/:id", a.deleteItem(models.KindComment), authors, "Delete your comment and its owed jobs", nil, nil, 204, nil},
		{http.MethodDelete, "/api/listeners/pitches/:id", a.deleteItem(models.KindPitch), authors, "Delete your pitch and its owed jobs", nil, nil, 204, nil},
		{http.MethodPost, "/api/listeners/items/:kind/:id/appeal", a.appeal, authors, "Appeal the block of your item, once, with an optional note: it enters the review queue as an appeal", appealRequest{}, appealJSON{}, 201, nil},
		{http.MethodGet, "/api/listeners/mine", a.mine, authors, "Your items (newest first across kinds, filtered, paged), their verdicts, scores, owed jobs and budget; runs your due jobs in the background; with wait=N and a matching If-None-Match, a long poll", nil, mineJSON{}, 200, mineQueryParams{}},
		{http.MethodGet, "/api/listeners/mine/stream", a.mineStream, authors, "Your view as server-sent events: event mine (id: the ETag, data: the view) at once unless Last-Event-ID is the current tag, then on every change; a ': ping' comment every 15 s; ends with event error (unauthorized, or unavailable with retry:) when its credential is revoked or the database stays unreachable; ?ticket= instead of Authorization", nil, nil, 200, mineStreamParams{}},
		{http.MethodPost, "/api/listeners/mine/ticket", a.createTicket, authors, "A stream ticket for EventSource: valid 60 s, once, bound to you and the credential that asked", nil, ticketJSON{}, 200, nil},

		{http.MethodGet, "/api/songs", a.listSongs, anyone, "Public songs, by art or newest", nil, songListJSON{}, 200, songsQuery{}},
		{http.MethodGet, "/api/songs/:id", a.getSong, anyone, "A public song with its allowed revisions and comments", nil, songDetailJSON{}, 200, nil},
		{http.MethodGet, "/api/pitches", a.listPitches, anyone, "Public pitches, newest first", nil, pitchListJSON{}, 200, pageQuery{}},

		{http.MethodPost, "/api/admin/users", a.createUser, admins, "Create a user; the token is shown once", userRequest{}, userCreatedJSON{}, 201, nil},
		{http.MethodGet, "/api/admin/users", a.listUsers, admins, "Every user, with whether they are disabled", nil, userListJSON{}, 200, pageQuery{}},
		{http.MethodPost, "/api/admin/users/:id/token", a.rotateToken, admins, "Give a user a new token, shown once; the old one and the user's sessions stop working at once", nil, userCreatedJSON{}, 200, nil},
		{http.MethodPatch, "/api/admin/users/:id", a.patchUser, admins, "Disable (lock out) or enable a user; their owed work stays; the last enabled admin cannot be disabled (409)", userPatch{}, userAdminJSON{}, 200, nil},
		{http.MethodPut, "/api/admin/users/:id/budget", a.setBudget, admins, "Set a user's daily budget (null: the default)", budgetRequest{}, budgetRowJSON{}, 200, nil},
		{http.MethodGet, "/api/admin/budgets", a.listBudgets, admins, "Each author's spend today and limit", nil, budgetListJSON{}, 200, pageQuery{}},
		{http.MethodGet, "/api/admin/jobs", a.listJobs, admins, "Owed jobs, filtered; with state=done (or an outcome) the jobs settled within OWED_RETAIN_DONE instead, each with its outcome and the attempt that settled it", nil, jobListJSON{}, 200, jobsQuery{}},
		{http.MethodGet, "/api/admin/jobs/:id", a.getJob, admins, "One job, owed or settled within OWED_RETAIN_DONE (state done), its item's title, its author, and every attempt with its error", nil, jobDetailJSON{}, 200, nil},
		{http.MethodPost, "/api/admin/jobs/:id/retry", a.retryJob, admins, "Make one job due now (409 while it runs, while the budget it waits for cannot cover it, or once it is done); not an attempt by itself", nil, jobDetailJSON{}, 200, nil},
		{http.MethodPost, "/api/admin/jobs/retry", a.retryJobs, admins, "Make every job the filter selects due now, except running ones and those whose budget still cannot cover them", jobFilterRequest{}, retriedJSON{}, 200, nil},
		{http.MethodGet, "/api/admin/holds", a.getHolds, admins, "What is held: screens, scores, webhook deliveries", nil, holdsJSON{}, 200, nil},
		{http.MethodPut, "/api/admin/holds", a.putHolds, admins, "Hold or lift work: held work is claimed by no replica, neither charged nor asked; a field left out keeps its value", holdsRequest{}, holdsJSON{}, 200, nil},
		{http.MethodGet, "/api/admin/items/:kind/:id", a.getItem, admins, "An item's page: its content, author and verdict, the work it owes, every attempt with its error, every verdict (the model's, by hand, overturned) with who and why, its review entries and appeal with their claims, the audit entries on it and the webhook deliveries it caused", nil, itemPageJSON{}, 200, nil},
		{http.MethodPost, "/api/admin/items/:kind/:id/verdict", a.decide, admins, "Decide an item's verdict by hand: settles its screen job as the admin's verdict", verdictRequest{}, screenJSON{}, 200, nil},
		{http.MethodGet, "/api/admin/review", a.listReview, admins, "The review queue: the model's unsure verdicts and authors' appeals, oldest first, each with its content, the model's suggestion, its author's history and its claim; decided with the verdict route", nil, reviewListJSON{}, 200, reviewQuery{}},
		{http.MethodGet, "/api/admin/review/measures", a.reviewMeasures, admins, "The review queue's measures over the last 7 days: open entries, time to decision (p50, p90) per reason, the share of the model's suggestions overturned", nil, reviewMeasuresJSON{}, 200, nil},
		{http.MethodPost, "/api/admin/review/:kind/:id/claim", a.claimReview, admins, "Claim a review entry for 5 minutes (again: renew); another moderator's live claim answers 409 claimed", nil, reviewEntryJSON{}, 200, nil},
		{http.MethodDelete, "/api/admin/review/:kind/:id/claim", a.releaseReview, admins, "Release your claim on a review entry (skip it): the next moderator may take it at once; audited. Another moderator's live claim answers 409 claimed", nil, nil, 204, nil},
		{http.MethodGet, "/api/admin/events", a.listEvents, admins, "Attempt events, newest first", nil, eventListJSON{}, 200, eventsQuery{}},
		{http.MethodGet, "/api/admin/stats", a.stats, admins, "The overview's summary", nil, statsJSON{}, 200, nil},
		{http.MethodGet, "/api/admin/model", a.modelState, admins, "The model's breaker (closed, open, probing) and this process's calls in flight and their cap", nil, modelStateJSON{}, 200, nil},
		{http.MethodPost, "/api/admin/model/probe", a.probeModel, admins, "One test call to the model now (a fixed harmless subject, charged to nobody; at most one every 5 s across replicas; allowed while work is held): an answer closes the breaker. Answers the model's state after it, with what the call found", nil, modelStateJSON{}, 200, nil},
		{http.MethodGet, "/api/admin/audit", a.listAudit, admins, "The audit trail: every operator action, who, when, on what and what changed; newest first", nil, auditListJSON{}, 200, auditQuery{}},
		// Shadow models (docs/shadow.md).
		{http.MethodGet, "/api/admin/shadow", a.getShadow, admins, "The candidate model or rubric beside the live one: the confusion table of verdicts by kind, the flips, the confidence histograms; the scores' difference, the public list's rank correlation and movers; the calls, the re-score's progress, and the drift runs of the anchor set against the live model (newest first, at most 60)", nil, shadowJSON{}, 200, nil},
		{http.MethodPost, "/api/admin/shadow/promote", a.promoteShadow, admins, "Make the candidate live on every replica: live work asks it under its rubric from now on, every song scored under another rubric is re-scored (owed work, charged to nobody), the owed shadow calls are dropped. Audited. 409 no_candidate without one, promoted when it is live already", nil, shadowJSON{}, 200, nil},
		{http.MethodPost, "/api/admin/shadow/rollback", a.rollbackShadow, admins, "Make the configured model and rubric live again; songs scored under the candidate's rubric are re-scored. Audited. 409 not_promoted when the configured model is live", nil, shadowJSON{}, 200, nil},
		{http.MethodGet, "/api/admin/plugins", a.plugins, admins, "The admin SPA's plugin manifest", nil, pluginsJSON{}, 200, nil},

		// Shadow models and drift (docs/shadow.md).
		{http.MethodGet, "/api/admin/anchors", a.listAnchors, admins, "The anchor set drift runs re-ask the live model about: items with their expected verdict and/or reference art, oldest first", nil, anchorListJSON{}, 200, nil},
		{http.MethodPost, "/api/admin/anchors", a.addAnchor, admins, "Add an existing item to the anchor set with its expected verdict, its reference art (revisions only), or both; an item already in the set answers 409 conflict. Audited", anchorRequest{}, anchorAnswerJSON{}, 201, nil},
		{http.MethodDelete, "/api/admin/anchors/:id", a.deleteAnchor, admins, "Take an anchor out of the set; past runs keep what they measured. Audited", nil, nil, 204, nil},

		{http.MethodPost, "/api/admin/webhooks", a.createWebhook, admins, "Subscribe a URL to events; the signing secret is shown once", webhookRequest{}, webhookCreatedJSON{}, 201, nil},
		{http.MethodGet, "/api/admin/webhooks", a.listWebhooks, admins, "Webhook subscriptions", nil, webhookListJSON{}, 200, pageQuery{}},
		{http.MethodPatch, "/api/admin/webhooks/:id", a.updateWebhook, admins, "Enable or disable a webhook; disabling cancels its pending deliveries", webhookUpdate{}, webhookAnswerJSON{}, 200, nil},
		{http.MethodDelete, "/api/admin/webhooks/:id", a.deleteWebhook, admins, "Delete a webhook with its deliveries", nil, nil, 204, nil},
		{http.MethodPost, "/api/admin/webhooks/:id/secret", a.rotateWebhookSecret, admins, "Give a webhook a new signing secret, shown once (Cache-Control: no-store); until previousSecretUntil (OWED_WEBHOOK_SECRET_OVERLAP) each delivery carries a signature by each secret, space-separated in webhook-signature", nil, webhookSecretJSON{}, 200, nil},
		{http.MethodGet, "/api/admin/webhooks/:id/deliveries", a.listDeliveries, admins, "A webhook's deliveries, newest first, each with its latest attempts", nil, deliveryListJSON{}, 200, deliveriesQuery{}},
		{http.MethodGet, "/api/admin/deliveries/:id", a.getDelivery, admins, "One delivery with its payload and every attempt", nil, deliveryAnswerJSON{}, 200, nil},
		{http.MethodPost, "/api/admin/deliveries/:id/redeliver", a.redeliver, admins, "Make a delivery due now, pending again, with the same webhook-id", nil, deliveryAnswerJSON{}, 200, nil},
		// The first paths of the two above, whose /api/admin/webhooks/deliveries/{id} a path
		// template cannot tell from /api/admin/webhooks/{id}/deliveries: deprecated aliases.
		{http.MethodGet, "/api/admin/webhooks/deliveries/:id", a.getDelivery, admins, "One delivery (deprecated: GET /api/admin/deliveries/{id})", nil, deliveryAnswerJSON{}, 200, nil},
		{http.MethodPost, "/api/admin/webhooks/deliveries/:id/redeliver", a.redeliver, admins, "Redeliver (deprecated: POST /api/admin/deliveries/{id}/redeliver)", nil, deliveryAnswerJSON{}, 200, nil},

		{http.MethodPost, "/api/scrapes", a.createScrape, bots, "Record a scrape the bot starts: active, it holds the walk lock", scrapeRequest{}, scrapeJSON{}, 201, nil},
		{http.MethodGet, "/api/scrapes", a.listScrapes, bots, "Scrapes with their counts (deleted ones leave the list)", nil, scrapeListJSON{}, 200, scrapesQuery{}},
		{http.MethodGet, "/api/scrapes/:id", a.getScrape, bots, "One scrape with its counts", nil, scrapeJSON{}, 200, nil},
		{http.MethodPatch, "/api/scrapes/:id", a.patchScrape, bots, "Change a scrape's state (active, paused, done, failed) or downloaded count", scrapePatch{}, scrapeJSON{}, 200, nil},
		{http.MethodDelete, "/api/scrapes/:id", a.deleteScrape, bots, "Delete a scrape: pending-delete now, its previews and rows go in the background", nil, scrapeJSON{}, 202, nil},
		{http.MethodPost, "/api/scrapes/:id/media", a.pushMedia, bots, "Push 1 to 1000 media rows (all or none; http(s) URLs on public addresses unless OWED_MEDIA_ALLOW_PRIVATE); refreshes the walk lock", mediaPushRequest{}, acceptedJSON{}, 202, nil},
		{http.MethodGet, "/api/scrapes/:id/media", a.listScrapeMedia, bots, "A scrape's media rows, optionally in one preview state", nil, mediaListJSON{}, 200, scrapeMediaQuery{}},
		{http.MethodGet, "/api/media/:id/preview", a.mediaPreview, bots, "The cached JPEG preview of a media row (404 until cached)", nil, nil, 200, nil},
		{http.MethodGet, "/api/backfill", a.backfillStatus, admins, "The backfill queue: jobs, members, rates, ETAs, totals, settings, rate limit", nil, backfillStatusJSON{}, 200, nil},
		{http.MethodPost, "/api/backfill/start", a.startBackfill, admins, "Start every job with pending rows, smallest first, or one chat's; the body is optional", backfillTarget{}, backfillStatusJSON{}, 200, nil},
		{http.MethodPost, "/api/backfill/pause", a.pauseBackfill, admins, "Pause every job, or one chat's, after its current batch; the body is optional", backfillTarget{}, backfillStatusJSON{}, 200, nil},
		{http.MethodPost, "/api/admin/backfill/walk/release", a.releaseWalk, admins, "End the walk lock an active scrape holds (the bot's walk may have died): the queue goes on now; a push takes it again. Audited", nil, backfillStatusJSON{}, 200, nil},
		{http.MethodGet, "/api/backfill/settings", a.getBackfillSettings, admins, "The backfill queue's settings", nil, backfillSettingsJSON{}, 200, nil},
		{http.MethodPut, "/api/backfill/settings", a.putBackfillSettings, admins, "Replace the backfill settings (batchSize 1-500, batchPauseMs 0-3600000)", backfillSettingsRequest{}, backfillStatusJSON{}, 200, nil},
	}
	return rs
}

// Register mounts the API, the health and metrics endpoints on e.
func (a *API) Register(e *echo.Echo) {
	if len(a.CORSOrigins) > 0 {
		e.Pre(a.cors()) // before routing: a preflight (OPTIONS) has no route of its own
	}
	e.Pre(noStore)
	g := e.Group("", a.authenticate, a.writeLimit())
	for _, r := range a.routes() {
		var mw []echo.MiddlewareFunc
		if r.roles != nil {
			mw = append(mw, allow(r.roles...))
		}
		if r.roles != nil && isWrite(r.method) {
			mw = append(mw, a.writeRequest(r.method, r.path))
		}
		if params := queryNames(r.query); params != nil {
			mw = append(mw, onceEach(params))
		}
		g.Add(r.method, r.path, r.handler, mw...)
	}
	e.GET("/healthz", a.healthz)
	e.GET("/readyz", a.readyz)
}

// onceEach refuses a documented query parameter given more than once (?task=a&task=b): which
// of the values would count is a guess a filter must not make. It refuses one given empty
// (?limit=) too, as any malformed value: the document says a value is given or left out.
func onceEach(params []string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			q := c.QueryParams()
			for _, p := range params {
				if len(q[p]) > 1 {
					return invalid(p, p+" must be given once")
				}
				if vs, given := q[p]; given && vs[0] == "" {
					return invalid(p, p+" must not be empty: leave it out instead")
				}
			}
			return next(c)
		}
	}
}
