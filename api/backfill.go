package api

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/owed/owed/models"
	"github.com/owed/owed/scheduler"
)

// maxBatchPauseMs caps the cooldown between batches: an hour is already a crawl.
const maxBatchPauseMs = 3_600_000

// backfillStatusJSON is the whole backfill queue (scheduler.BackfillStatus on the wire).
type backfillStatusJSON struct {
	Jobs     []backfillJobJSON    `json:"jobs"`
	Totals   backfillTotalsJSON   `json:"totals"`
	Settings backfillSettingsJSON `json:"settings"`
	// LimitedUntil is set while a rate limit holds the queue.
	LimitedUntil *timestamp `json:"limitedUntil"`
	// EstimatedPerMinute is the rate the settings and media gaps allow, cooldowns aside.
	EstimatedPerMinute float64    `json:"estimatedPerMinute"`
	WalkingUntil       *timestamp `json:"walkingUntil" description:"while a walk holds the media-traffic lock: when it lapses unless the walk pushes again"`
	WalkingChat        *string    `json:"walkingChat" description:"the chat whose walk holds the media-traffic lock"`
}

// backfillSettingsJSON are the queue's settings.
type backfillSettingsJSON struct {
	BatchSize    int   `json:"batchSize" minimum:"1" maximum:"500" description:"how many rows one batch previews"`
	BatchPauseMs int64 `json:"batchPauseMs" minimum:"0" maximum:"3600000" description:"the cooldown between batches"`
	Auto         bool  `json:"auto" description:"start jobs with pending rows when owed starts"`
}

// backfillMemberJSON is one member scrape of a job with its counts.
type backfillMemberJSON struct {
	ScrapeID      int64             `json:"scrapeId"`
	State         string            `json:"state" enum:"scrapeState"`
	Backend       string            `json:"backend"`
	Mode          string            `json:"mode"`
	Pending       int64             `json:"pending"`
	Cached        int64             `json:"cached"`
	Failed        int64             `json:"failed"`
	Suspect       int64             `json:"suspect" description:"rows waiting for their one delayed retry"`
	Unverified    int64             `json:"unverified" description:"rows that failed their retry too"`
	Skipped       int64             `json:"skipped" description:"rows without a preview (video, audio)"`
	Total         int64             `json:"total"`
	Downloaded    int64             `json:"downloaded"`
	Bytes         int64             `json:"bytes" description:"the size of the stored previews"`
	PendingByKind models.KindCounts `json:"pendingByKind"`
}

// backfillJobJSON is one chat's job; see scheduler.BackfillJobStatus for what each figure means.
type backfillJobJSON struct {
	ChatID  string               `json:"chatId"`
	GuildID *string              `json:"guildId"`
	State   string               `json:"state" enum:"backfillState"`
	Members []backfillMemberJSON `json:"members"`
	backfillCountsJSON
	Processed    int64      `json:"processed" minimum:"0" description:"the rows this run settled (cached, skipped, failed or unverified), each once: never more than the chat's rows"`
	StartedAt    *timestamp `json:"startedAt" description:"when this run's first batch began; null while it has not run (queued, or waiting before its first batch)"`
	FinishedAt   *timestamp `json:"finishedAt"`
	PerMinute    float64    `json:"perMinute" description:"rows a minute: the run's measured rate (over running time, and the rate-limit waits once they recur: waitedMs), else the queue's latest measured rate, else the estimate"`
	RateMeasured bool       `json:"rateMeasured"`
	WaitedMs     int64      `json:"waitedMs" minimum:"0" description:"the rate-limit waits (Retry-After) of this run that its measured rate counts: all of them from the second on, 0 before"`
	EtaMs        *int64     `json:"etaMs" description:"the time to clear the pending rows; null when nothing is pending"`
	EtaStartMs   *int64     `json:"etaStartMs" description:"the wait until the job starts; null when not scheduled"`
	EtaRunMs     *int64     `json:"etaRunMs" description:"the time the job needs once it runs, waits aside"`
	EtaTotalMs   *int64     `json:"etaTotalMs" description:"when the job should finish, from now; null when not scheduled"`
	Position     *int       `json:"position" minimum:"0" description:"0 running, 1… queue order, null not scheduled"`
	WaitMs       *int64     `json:"waitMs" description:"the rate limit or walk wait in the ETAs; null when not scheduled"`
	WaitsFor     *string    `json:"waitsFor" enum:"waitsFor"`
}

// backfillStates lists the states of a backfill job as the status shows them.
var backfillStates = []string{"idle", "queued", models.BackfillRunning, models.BackfillPaused, models.BackfillDone}

// backfillCountsJSON are a job's, or the queue's, rows by preview state, and what was stored.
type backfillCountsJSON struct {
	Pending    int64 `json:"pending"`
	Cached     int64 `json:"cached"`
	Failed     int64 `json:"failed"`
	Skipped    int64 `json:"skipped"`
	Total      int64 `json:"total"`
	Downloaded int64 `json:"downloaded"`
	Bytes      int64 `json:"bytes" description:"the size of the stored previews"`
}

// backendTotalsJSON are the counts of one backend's member scrapes.
type backendTotalsJSON struct {
	Pending int64 `json:"pending"`
	Cached  int64 `json:"cached"`
	Failed  int64 `json:"failed"`
	Skipped int64 `json:"skipped"`
	Total   int64 `json:"total"`
}

// backfillTotalsJSON span every member scrape, listed or hidden.
type backfillTotalsJSON struct {
	backfillCountsJSON
	PerMinute  float64                       `json:"perMinute"`
	EtaMs      *int64                        `json:"etaMs"`
	EtaStartMs *int64                        `json:"etaStartMs"`
	EtaRunMs   *int64                        `json:"etaRunMs"`
	EtaTotalMs *int64                        `json:"etaTotalMs"`
	ByBackend  map[string]*backendTotalsJSON `json:"byBackend"`
}

// backfillSummaryJSON is the overview's line about the backfill.
type backfillSummaryJSON struct {
	Pending      int64      `json:"pending"`
	PerMinute    float64    `json:"perMinute"`
	EtaMs        *int64     `json:"etaMs"`
	Running      *string    `json:"running" description:"the chat whose job runs now"`
	LimitedUntil *timestamp `json:"limitedUntil"`
	WalkingUntil *timestamp `json:"walkingUntil" description:"a walk holds the media-traffic lock until then"`
	WalkingChat  *string    `json:"walkingChat" description:"the chat it walks"`
}

// backfillStatusOf puts the queue's status on the wire.
func backfillStatusOf(st scheduler.BackfillStatus) backfillStatusJSON {
	out := backfillStatusJSON{Jobs: make([]backfillJobJSON, 0, len(st.Jobs)), Settings: backfillSettingsJSON(st.Settings),
		LimitedUntil: timePtr(st.LimitedUntil), EstimatedPerMinute: st.EstimatedPerMinute,
		WalkingUntil: timePtr(st.WalkingUntil), WalkingChat: st.WalkingChat}
	for _, j := range st.Jobs {
		members := each(j.Members, func(m scheduler.BackfillMember) backfillMemberJSON { return backfillMemberJSON(m) })
		out.Jobs = append(out.Jobs, backfillJobJSON{ChatID: j.ChatID, GuildID: j.GuildID, State: j.State, Members: members,
			backfillCountsJSON: backfillCountsJSON(j.BackfillCounts), Processed: j.Processed,
			StartedAt: timePtr(j.StartedAt), FinishedAt: timePtr(j.FinishedAt), PerMinute: j.PerMinute, RateMeasured: j.RateMeasured, WaitedMs: j.WaitedMs,
			EtaMs: msOf(j.Eta), EtaStartMs: msOf(j.EtaStart), EtaRunMs: msOf(j.EtaRun), EtaTotalMs: msOf(j.EtaTotal),
			Position: j.Position, WaitMs: msOf(j.Wait), WaitsFor: j.WaitsFor})
	}
	t := st.Totals
	out.Totals = backfillTotalsJSON{backfillCountsJSON: backfillCountsJSON(t.BackfillCounts), PerMinute: t.PerMinute,
		EtaMs: msOf(t.Eta), EtaStartMs: msOf(t.EtaStart), EtaRunMs: msOf(t.EtaRun), EtaTotalMs: msOf(t.EtaTotal)}
	if t.ByBackend != nil {
		out.Totals.ByBackend = make(map[string]*backendTotalsJSON, len(t.ByBackend))
		for name, b := range t.ByBackend {
			out.Totals.ByBackend[name] = new(backendTotalsJSON(*b))
		}
	}
	return out
}

// backfillSummaryOf puts the overview's line on the wire; nil stays nil.
func backfillSummaryOf(s *scheduler.BackfillSummary) *backfillSummaryJSON {
	if s == nil {
		return nil
	}
	return &backfillSummaryJSON{Pending: s.Pending, PerMinute: s.PerMinute, EtaMs: msOf(s.Eta), Running: s.Running,
		LimitedUntil: timePtr(s.LimitedUntil), WalkingUntil: timePtr(s.WalkingUntil), WalkingChat: s.WalkingChat}
}

var errNoBackfill = &Error{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "the backfill queue is not running in this process"}

// backfillStatus is the whole queue: jobs with their members, rates, ETAs, totals, settings and
// the rate limit.
func (a *API) backfillStatus(c echo.Context) error {
	if a.Backfill == nil {
		return errNoBackfill
	}
	st, err := a.Backfill.Status(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, backfillStatusOf(st))
}

// backfillTarget names the one chat a start or pause is for; without it, every job.
type backfillTarget struct {
	ChatID *string `json:"chatId" maxLength:"100"`
}

// readTarget reads the optional {"chatId"} body of start and pause (none at all: every job).
func readTarget(c echo.Context) (string, error) {
	req := c.Request()
	body, err := readBody(req)
	if err != nil {
		return "", err
	}
	if len(body) == 0 && req.Header.Get(echo.HeaderContentType) == "" {
		return "", nil
	}
	var t backfillTarget
	if err := bind(c, &t); err != nil {
		return "", err
	}
	if t.ChatID == nil {
		return "", nil
	}
	if err := checkID("chatId", *t.ChatID); err != nil {
		return "", err
	}
	return *t.ChatID, nil
}

func (a *API) startBackfill(c echo.Context) error {
	return a.backfillJobs(c, models.AuditBackfillStart, (*scheduler.Backfill).StartJobs)
}

func (a *API) pauseBackfill(c echo.Context) error {
	return a.backfillJobs(c, models.AuditBackfillPause, (*scheduler.Backfill).PauseJobs)
}

// backfillJobs starts or pauses every job, or the body's chat's, audited, and answers the status.
func (a *API) backfillJobs(c echo.Context, action string, do func(*scheduler.Backfill, context.Context, string) error) error {
	chat, err := readTarget(c)
	if err != nil {
		return err
	}
	if a.Backfill == nil {
		return errNoBackfill
	}
	if err := do(a.Backfill, c.Request().Context(), chat); err != nil {
		return err
	}
	if err := a.auditAfter(c, action, backfillAuditTarget(chat), map[string]any{"chatId": chat}); err != nil {
		return err
	}
	return a.backfillStatus(c)
}

// getBackfillSettings answers the queue's settings.
func (a *API) getBackfillSettings(c echo.Context) error {
	if a.Backfill == nil {
		return errNoBackfill
	}
	s, err := a.Backfill.Settings(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, backfillSettingsJSON(s))
}

// backfillSettingsRequest replaces the settings; every field is required.
type backfillSettingsRequest struct {
	BatchSize    *int   `json:"batchSize" required:"true" minimum:"1" maximum:"500"`
	BatchPauseMs *int64 `json:"batchPauseMs" required:"true" minimum:"0" maximum:"3600000"`
	Auto         *bool  `json:"auto" required:"true"`
}

// putBackfillSettings replaces the settings (every field required) and answers the status.
func (a *API) putBackfillSettings(c echo.Context) error {
	var req backfillSettingsRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	switch {
	case req.BatchSize == nil:
		return invalid("batchSize", "batchSize is required")
	case *req.BatchSize < 1 || *req.BatchSize > scheduler.MaxBatchSize:
		return invalid("batchSize", "batchSize must be a whole number from 1 to 500")
	case req.BatchPauseMs == nil:
		return invalid("batchPauseMs", "batchPauseMs is required")
	case *req.BatchPauseMs < 0 || *req.BatchPauseMs > maxBatchPauseMs:
		return invalid("batchPauseMs", "batchPauseMs must be a whole number of ms from 0 to 3600000")
	case req.Auto == nil:
		return invalid("auto", "auto is required")
	}
	if a.Backfill == nil {
		return errNoBackfill
	}
	if err := a.Backfill.SetSettings(c.Request().Context(), scheduler.BackfillSettings{
		BatchSize: *req.BatchSize, BatchPauseMs: *req.BatchPauseMs, Auto: *req.Auto}); err != nil {
		return err
	}
	if err := a.auditAfter(c, models.AuditBackfillSet, "backfill", map[string]any{"batchSize": *req.BatchSize,
		"batchPauseMs": *req.BatchPauseMs, "auto": *req.Auto}); err != nil {
		return err
	}
	return a.backfillStatus(c)
}

// releaseWalk ends the walk lock an active scrape holds, audited, and answers the status.
func (a *API) releaseWalk(c echo.Context) error {
	if a.Backfill == nil {
		return errNoBackfill
	}
	_, err := a.Backfill.ReleaseWalk(c.Request().Context(), func(tx *models.Store, chats []string) error {
		if len(chats) == 0 {
			return nil // no walk held it: nothing changed
		}
		return audit(c, tx, models.AuditWalkRelease, "backfill", map[string]any{"walking": chats}, map[string]any{"walking": []string{}})
	})
	if err != nil {
		return err
	}
	return a.backfillStatus(c)
}
