package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
)

// stats is the overview's summary: owed jobs by why and task, and what was settled each minute
// of the last hour.
func (a *API) stats(c echo.Context) error {
	ctx := c.Request().Context()
	st, err := a.Store.Stats(ctx)
	if err != nil {
		return err
	}
	settled, err := a.Store.SettledPerMinute(ctx, 60)
	if err != nil {
		return err
	}
	type minute struct {
		At      string `json:"at"`
		Screen  int64  `json:"screen"`
		Score   int64  `json:"score"`
		Pending int64  `json:"pending"`
	}
	ms := make([]minute, 0, len(settled))
	for _, s := range settled {
		ms = append(ms, minute{At: msTime(s.Minute), Screen: s.Screen, Score: s.Score, Pending: s.Put})
	}
	health := map[string]string{"database": "ok", "model": "ok"}
	if p := a.modelProblem(); p != "" {
		health["model"] = p
	}
	holds, err := a.Store.Holds(ctx)
	if err != nil {
		return err
	}
	out := map[string]any{
		"jobs": map[string]any{"total": st.Total, "due": st.Due, "leased": st.Leased, "byWhy": st.ByWhy,
			"byTask": st.ByTask, "oldestDueAt": msTimePtr(st.OldestDueAt)},
		"settled": ms,
		"health":  health,
		"holds":   holds,
		"version": a.Version,
		"retention": map[string]string{"events": durationText(a.Retention.Events),
			"deliveries": durationText(a.Retention.Deliveries)},
	}
	if a.BackfillSummary != nil {
		out["backfill"] = a.BackfillSummary(ctx)
	}
	return c.JSON(http.StatusOK, out)
}

// durationText shows a retention as people say it: whole days as "30d", else Go's form; zero
// keeps everything.
func durationText(d time.Duration) string {
	switch {
	case d <= 0:
		return "forever"
	case d%(24*time.Hour) == 0:
		return strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d"
	}
	return d.String()
}
