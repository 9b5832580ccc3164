package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/owed/owed/models"
)

type jobJSON struct {
	ID         int64   `json:"id"`
	Task       string  `json:"task"`
	Kind       string  `json:"kind"`
	ItemID     int64   `json:"itemId"`
	UserID     int64   `json:"userId"`
	DueAt      string  `json:"dueAt"`
	Attempts   int     `json:"attempts"`
	Why        *string `json:"why"`
	Status     *int    `json:"status"`
	LeaseUntil *string `json:"leaseUntil"`
}

func jobOf(j models.Job) jobJSON {
	return jobJSON{ID: j.ID, Task: j.Task, Kind: j.Kind, ItemID: j.ItemID, UserID: j.UserID, DueAt: msTime(j.DueAt),
		Attempts: j.Attempts, Why: j.Why, Status: j.Status, LeaseUntil: msTimePtr(j.LeaseUntil)}
}

var (
	tasks     = []string{models.TaskScreen, models.TaskScore}
	kinds     = []string{models.KindRevision, models.KindComment, models.KindPitch}
	jobStates = []string{"due", "waiting", "leased"}
	whyFilter = append([]string{"none"}, models.Whys...)
)

// checkJobFilter validates a job filter, from the query or a JSON body alike.
func checkJobFilter(f models.JobFilter) error {
	for _, chk := range []struct {
		field, value string
		allowed      []string
	}{{"task", f.Task, tasks}, {"kind", f.Kind, kinds}, {"why", f.Why, whyFilter}, {"state", f.State, jobStates}} {
		if chk.value == "" {
			continue
		}
		ok := false
		for _, a := range chk.allowed {
			ok = ok || a == chk.value
		}
		if !ok {
			return invalid(chk.field, chk.field+" is not one of the accepted values")
		}
	}
	if f.UserID < 0 {
		return invalid("userId", "userId must be a positive integer")
	}
	if f.ItemID < 0 {
		return invalid("itemId", "itemId must be a positive integer")
	}
	return nil
}

func jobFilterFromQuery(c echo.Context) (models.JobFilter, error) {
	f := models.JobFilter{Task: c.QueryParam("task"), Kind: c.QueryParam("kind"), Why: c.QueryParam("why"), State: c.QueryParam("state")}
	var err error
	if f.UserID, err = queryID(c, "userId"); err != nil {
		return f, err
	}
	if f.ItemID, err = queryID(c, "itemId"); err != nil {
		return f, err
	}
	return f, checkJobFilter(f)
}

// listJobs pages through owed jobs, filtered.
func (a *API) listJobs(c echo.Context) error {
	f, err := jobFilterFromQuery(c)
	if err != nil {
		return err
	}
	limit, after, err := idPage(c, 50, 500)
	if err != nil {
		return err
	}
	jobs, err := a.Store.ListJobs(c.Request().Context(), f, after, limit)
	if err != nil {
		return err
	}
	return page(c, "jobs", jobs, limit, jobOf, func(j models.Job) any { return idCursor{j.ID} })
}

// getJob shows one job with its attempt history.
func (a *API) getJob(c echo.Context) error {
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	job, err := a.Store.JobByID(ctx, id)
	if err != nil {
		return err
	}
	evs, err := a.Store.ListEvents(ctx, models.EventFilter{Event: job.Task, Kind: job.Kind, ItemID: job.ItemID}, 0, 100)
	if err != nil {
		return err
	}
	out := make([]eventJSON, 0, len(evs))
	for _, e := range evs {
		out = append(out, eventOf(e))
	}
	return c.JSON(http.StatusOK, map[string]any{"job": jobOf(job), "events": out})
}

// retryJob makes one job due now.
func (a *API) retryJob(c echo.Context) error {
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	job, err := a.Store.JobByID(ctx, id)
	if err != nil {
		return err
	}
	if job.LeaseUntil != nil && *job.LeaseUntil > a.now().UnixMilli() {
		return &Error{Status: http.StatusConflict, Code: "leased", Message: "the job is running now"}
	}
	if _, err := a.Store.RetryJobs(ctx, models.JobFilter{ItemID: job.ItemID, Task: job.Task, Kind: job.Kind, UserID: job.UserID}); err != nil {
		return err
	}
	job, err = a.Store.JobByID(ctx, id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"job": jobOf(job)})
}

// retryJobs makes every job the filter selects (and no lease holds) due now.
func (a *API) retryJobs(c echo.Context) error {
	var f models.JobFilter
	if err := bind(c, &f); err != nil {
		return err
	}
	if err := checkJobFilter(f); err != nil {
		return err
	}
	n, err := a.Store.RetryJobs(c.Request().Context(), f)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]int64{"retried": n})
}
