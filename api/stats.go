package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/owed/owed/models"
	"github.com/owed/owed/scheduler"
)

// statsJSON is the overview's summary (keys in the order a map of them had).
type statsJSON struct {
	// Backfill is absent without a backfill queue, null when its summary could not be read.
	Backfill  **backfillSummaryJSON `json:"backfill,omitempty"`
	Health    map[string]string     `json:"health" description:"database and model: ok, or what is wrong"`
	Holds     holdsJSON             `json:"holds"`
	Jobs      jobStatsJSON          `json:"jobs"`
	Retention retentionJSON         `json:"retention"`
	Schedule  []scheduleEntryJSON   `json:"schedule" description:"the periodic work (robfig/cron), each entry with its next run"`
	Settled   []minuteJSON          `json:"settled" description:"what was settled each minute of the last hour"`
	Version   string                `json:"version"`
}

// jobStatsJSON counts the owed jobs (keys in the order a map of them had).
type jobStatsJSON struct {
	ByTask      map[models.Task]int64 `json:"byTask"`
	ByWhy       map[models.Why]int64  `json:"byWhy" description:"by why: none for jobs simply due or new, held for a held task's, breaker for those the open breaker puts off"`
	HeldByWhy   map[models.Why]int64  `json:"heldByWhy" description:"the held jobs (byWhy's held) by the why they would show once lifted: their own, or breaker for those the open breaker would put off"`
	Due         int64                 `json:"due" description:"due now and not held"`
	Held        int64                 `json:"held" description:"of a held task: claimed by no one until the hold is lifted"`
	Leased      int64                 `json:"leased" description:"jobs claimed and running now, on every replica (one job each, a score's three model calls included)"`
	OldestDueAt *timestamp            `json:"oldestDueAt"`
	Total       int64                 `json:"total"`
}

type minuteJSON struct {
	At      timestamp `json:"at"`
	Screen  int64     `json:"screen"`
	Score   int64     `json:"score"`
	Pending int64     `json:"pending"`
}

// retentionJSON is how long settled rows are kept (keys in the order a map of them had).
type retentionJSON struct {
	Deliveries string `json:"deliveries" description:"e.g. 30d, or forever"`
	Events     string `json:"events" description:"e.g. 30d, or forever"`
}

// stats is the overview's summary: owed jobs by why and task, and settled per minute for an hour.
func (a *API) stats(c echo.Context) error {
	ctx := c.Request().Context()
	st, err := a.Store.Stats(ctx)
	if err != nil {
		return err
	}
	if deferred, err := a.deferral(ctx); err != nil {
		return err
	} else if deferred != nil {
		for held, counts := range map[bool]map[models.Why]int64{false: st.ByWhy, true: st.HeldByWhy} {
			byWhy, err := a.Store.DeferredByWhy(ctx, *deferred, held)
			if err != nil {
				return err
			}
			for w, n := range byWhy {
				counts[w] -= n
				counts[models.WhyBreaker] += n
			}
		}
	}
	settled, err := a.Store.SettledPerMinute(ctx, 60)
	if err != nil {
		return err
	}
	ms := each(settled, func(s models.Settled) minuteJSON {
		return minuteJSON{At: timeStr(s.Minute), Screen: s.Screen, Score: s.Score, Pending: s.Put}
	})
	health := map[string]string{"database": "ok", "model": "ok"}
	if p := a.modelProblem(); p != "" {
		health["model"] = p
	} else if d := a.modelDegraded(ctx); d != "" {
		health["model"] = d
	}
	holds, err := a.Store.Holds(ctx)
	if err != nil {
		return err
	}
	out := statsJSON{
		Jobs: jobStatsJSON{Total: st.Total, Due: st.Due, Held: st.Held, Leased: st.Leased, ByWhy: st.ByWhy, HeldByWhy: st.HeldByWhy,
			ByTask: st.ByTask, OldestDueAt: timePtr(st.OldestDueAt)},
		Settled: ms,
		Health:  health,
		Holds:   holdsJSON(holds),
		Version: a.Version,
		Retention: retentionJSON{Events: durationText(a.Retention.Events),
			Deliveries: durationText(a.Retention.Deliveries)},
		Schedule: scheduleOf(a.Schedule),
	}
	if a.BackfillSummary != nil {
		sum := backfillSummaryOf(a.BackfillSummary(ctx))
		out.Backfill = &sum
	}
	return c.JSON(http.StatusOK, out)
}

// durationText shows a retention as people say it: whole days as "30d", else Go's form.
func durationText(d time.Duration) string {
	switch {
	case d <= 0:
		return "forever"
	case d%(24*time.Hour) == 0:
		return strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d"
	}
	return d.String()
}

// scheduleEntryJSON is one entry of the periodic work (robfig/cron) in the overview.
type scheduleEntryJSON struct {
	Name      string     `json:"name" description:"what the entry runs: content sweep, backfill queue, backfill deletes, webhook deliveries, retention pruner, optimize"`
	EveryMs   int64      `json:"everyMs" minimum:"1" description:"its period, in milliseconds"`
	NextRunAt *timestamp `json:"nextRunAt" description:"when it runs next; null while this process runs no schedule"`
	LastRunAt *timestamp `json:"lastRunAt" description:"when it last ran; null before its first run"`
}

// scheduleOf is the schedule on the wire, in the order its entries were added ([] when none).
func scheduleOf(s *scheduler.Schedule) []scheduleEntryJSON {
	if s == nil {
		return []scheduleEntryJSON{}
	}
	return each(s.Entries(), func(e scheduler.ScheduleEntry) scheduleEntryJSON {
		return scheduleEntryJSON{Name: e.Name, EveryMs: e.Every.Milliseconds(), NextRunAt: nonZeroTime(e.Next), LastRunAt: nonZeroTime(e.Prev)}
	})
}

// nonZeroTime is t on the wire, or nil when t is zero.
func nonZeroTime(t time.Time) *timestamp {
	if t.IsZero() {
		return nil
	}
	return timePtr(&t)
}
