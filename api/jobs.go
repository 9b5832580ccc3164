package api

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/owed/owed/models"
)

// jobJSON is an owed job as an admin sees it.
type jobJSON struct {
	ID         int64                `json:"id"`
	Task       models.Task          `json:"task" enum:"task"`
	Kind       models.Kind          `json:"kind" enum:"kind"`
	ItemID     int64                `json:"itemId"`
	UserID     int64                `json:"userId"`
	DueAt      timestamp            `json:"dueAt"`
	Attempts   int                  `json:"attempts"`
	Why        *models.Why          `json:"why" enum:"why"`
	Status     *int                 `json:"status"`
	LeaseUntil *timestamp           `json:"leaseUntil"`
	LastError  *string              `json:"lastError" maxLength:"500" description:"the last attempt's error"`
	UserName   string               `json:"userName"`
	ItemTitle  *string              `json:"itemTitle" description:"a revision's title, a comment's or pitch's first 80 characters"`
	SongID     *int64               `json:"songId"`
	State      models.JobState      `json:"state" enum:"jobState" description:"due, waiting or leased while owed; done once settled (listed for OWED_RETAIN_DONE; dueAt is then when it settled)"`
	Outcome    *models.EventOutcome `json:"outcome" enum:"doneOutcome" description:"done: how it settled; null while owed"`
	Final      *eventJSON           `json:"final" description:"done: the attempt that settled it; null while owed"`
}

// jobListJSON is a page of jobs (keys in the order a map of them had).
type jobListJSON struct {
	Jobs       []jobJSON `json:"jobs"`
	NextCursor *string   `json:"nextCursor"`
	Total      int64     `json:"total" description:"how many jobs the filter selects"`
}

// jobDetailJSON is one job with its item, author and attempts (keys in a map's order).
type jobDetailJSON struct {
	Author jobAuthor   `json:"author"`
	Events []eventJSON `json:"events" description:"every attempt at the job's task on its item, newest first"`
	Item   jobItem     `json:"item"`
	Job    jobJSON     `json:"job"`
}

type jobAuthor struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
}

type jobItem struct {
	ID      int64       `json:"id"`
	Kind    models.Kind `json:"kind" enum:"kind"`
	SongID  *int64      `json:"songId"`
	Title   *string     `json:"title"`
	Content *string     `json:"content" description:"the item's whole content (a revision's code, a comment's or pitch's body); null when the item is gone"`
}

// jobFilterRequest selects jobs, in the list's query and the bulk retry's body alike.
type jobFilterRequest struct {
	ID      int64               `json:"id" query:"id" minimum:"1" description:"one job"`
	Task    models.Task         `json:"task" query:"task" enum:"task"`
	Kind    models.Kind         `json:"kind" query:"kind" enum:"kind"`
	Why     models.Why          `json:"why" query:"why" enum:"whyFilter" description:"none: jobs with no why; held: the jobs of a held task"`
	UserID  int64               `json:"userId" query:"userId" minimum:"1"`
	Author  string              `json:"author" query:"author" maxLength:"200" description:"part of the author's name (in the query: or a user id)"`
	ItemID  int64               `json:"itemId" query:"itemId" minimum:"1"`
	State   models.JobState     `json:"state" query:"state" enum:"jobState" description:"done: the settled jobs (listed for OWED_RETAIN_DONE; never retried); otherwise owed jobs only"`
	Outcome models.EventOutcome `json:"outcome" query:"outcome" enum:"doneOutcome" description:"settled jobs that ended so (implies state done)"`
}

func (f jobFilterRequest) filter() models.JobFilter {
	return models.JobFilter{ID: f.ID, Task: f.Task, Kind: f.Kind, Why: f.Why, UserID: f.UserID, Author: f.Author, ItemID: f.ItemID, State: f.State,
		Outcome: f.Outcome}
}

// jobsQuery are the query parameters of GET /api/admin/jobs.
type jobsQuery struct {
	jobFilterRequest
	Sort string `query:"sort" enum:"jobSort"`
	pageQuery
}

type retriedJSON struct {
	Retried int64       `json:"retried" description:"jobs made due now"`
	Skipped skippedJSON `json:"skipped" description:"jobs the filter selected but left as they were, by reason"`
}

type skippedJSON struct {
	Budget int64 `json:"budget" description:"waiting for a budget that still cannot cover them"`
	Held   int64 `json:"held" description:"their task is held: lift the hold to run them"`
}

// jobOf shows a job as the admin sees it (deferred: when the open breaker asks its jobs again).
func (a *API) jobOf(h models.Holds, deferred *time.Time) func(j models.JobRow) jobJSON {
	now := a.now()
	return func(j models.JobRow) jobJSON {
		out := jobJSON{ID: j.ID, Task: j.Task, Kind: j.Kind, ItemID: j.ItemID, UserID: j.UserID, DueAt: timeStr(j.DueAt),
			Attempts: j.Attempts, Status: j.Status, LeaseUntil: timePtr(j.LeaseUntil), LastError: j.LastError,
			UserName: j.UserName, ItemTitle: j.ItemTitle, SongID: j.SongID}
		if j.Final != nil { // settled: as it ended
			final := eventOf(*j.Final)
			out.Why, out.State, out.Outcome, out.Final = j.Why, models.JobDone, &final.Outcome, &final
			return out
		}
		out.Why = models.ShownWhy(h, deferred, &j.Job, now)
		switch {
		case j.LeaseUntil != nil && j.LeaseUntil.After(now):
			out.State = models.JobLeased
		case j.DueAt.After(now):
			out.State = models.JobWaiting
		default:
			out.State = models.JobDue
		}
		return out
	}
}

// deferral is when the jobs the open breaker puts off are asked again; nil while it is closed.
func (a *API) deferral(ctx context.Context) (*time.Time, error) {
	if a.Content == nil {
		return nil, nil
	}
	return a.Content.Deferral(ctx)
}

var (
	jobSorts  = []string{models.JobsByID, models.JobsByDue, models.JobsByAttempts}
	whyFilter = append([]models.Why{"none"}, models.Whys...)
)

// maxAuthorFilter caps the author filter's length: a name is at most this long.
const maxAuthorFilter = 200

// checkJobFilter validates a job filter, from the query or a JSON body alike.
func checkJobFilter(f models.JobFilter) error {
	for _, chk := range []struct{ field, value, list string }{
		{"task", string(f.Task), "task"}, {"kind", string(f.Kind), "kind"}, {"why", string(f.Why), "whyFilter"}, {"state", string(f.State), "jobState"},
		{"outcome", string(f.Outcome), "doneOutcome"},
	} {
		if chk.value != "" && !slices.Contains(enumLists[chk.list], chk.value) {
			return invalid(chk.field, chk.field+" is not one of the accepted values")
		}
	}
	if f.Outcome != "" && f.State != "" && f.State != models.JobDone {
		return invalid("outcome", "outcome selects settled jobs: state done, or no state")
	}
	if f.ID < 0 {
		return invalid("id", "id must be a positive integer")
	}
	if f.UserID < 0 {
		return invalid("userId", "userId must be a positive integer")
	}
	if f.ItemID < 0 {
		return invalid("itemId", "itemId must be a positive integer")
	}
	if len([]rune(f.Author)) > maxAuthorFilter {
		return invalid("author", "author is longer than any name")
	}
	if !utf8.ValidString(f.Author) || strings.IndexFunc(f.Author, unicode.IsControl) >= 0 {
		return invalid("author", "author must be printable text")
	}
	return nil
}

func jobFilterFromQuery(c echo.Context) (models.JobFilter, error) {
	f := models.JobFilter{Task: models.Task(c.QueryParam("task")), Kind: models.Kind(c.QueryParam("kind")), Why: models.Why(c.QueryParam("why")),
		State: models.JobState(c.QueryParam("state")), Outcome: models.EventOutcome(c.QueryParam("outcome"))}
	var err error
	if f.ID, err = queryID(c, "id"); err != nil {
		return f, err
	}
	if f.UserID, err = queryID(c, "userId"); err != nil {
		return f, err
	}
	if f.ItemID, err = queryID(c, "itemId"); err != nil {
		return f, err
	}
	// author: a user id, or part of a name.
	if author := strings.TrimSpace(c.QueryParam("author")); author != "" {
		if id, err := strconv.ParseInt(strings.TrimPrefix(author, "#"), 10, 64); err == nil && id > 0 {
			if f.UserID != 0 && f.UserID != id {
				return f, invalid("author", "author and userId name different users")
			}
			f.UserID = id
		} else {
			f.Author = author
		}
	}
	if err := checkJobFilter(f); err != nil {
		return f, err
	}
	if f.Outcome != "" {
		f.State = models.JobDone
	}
	return f, nil
}

// jobCursor is the job list's cursor: the last job's id and its sort key.
type jobCursor struct {
	ID  int64  `json:"i"`
	Key int64  `json:"k,omitempty"`
	By  string `json:"s,omitempty"`
}

// listJobs pages through owed jobs, filtered and sorted, with the total the filter selects.
func (a *API) listJobs(c echo.Context) error {
	f, err := jobFilterFromQuery(c)
	if err != nil {
		return err
	}
	order, err := oneOf(c, "sort", jobSorts...)
	if err != nil {
		return err
	}
	if order == "" {
		order = models.JobsByID
	}
	limit, err := queryLimit(c, 50, 500)
	if err != nil {
		return err
	}
	var cur jobCursor
	var after *models.JobCursor
	if ok, err := decodeCursor(c, &cur); err != nil {
		return err
	} else if ok {
		if cur.ID <= 0 || (cur.By != "" && cur.By != order) || (cur.By == "" && order != models.JobsByID) {
			return invalid("cursor", "cursor is not one this server gave out for this sort")
		}
		after = &models.JobCursor{ID: cur.ID, Key: cur.Key}
	}
	jobs, total, show, err := a.jobPage(c.Request().Context(), f, order, after, limit)
	if err != nil {
		return err
	}
	out, next := pageOf(jobs, limit, show, func(j models.JobRow) any {
		last, by := j.Cursor(order), order
		if by == models.JobsByID {
			by = "" // the cursor of the default order stays the one it always was
		}
		return jobCursor{ID: last.ID, Key: last.Key, By: by}
	})
	return c.JSON(http.StatusOK, jobListJSON{Jobs: out, NextCursor: next, Total: total})
}

// jobPage reads a page of the jobs f selects, owed or settled, with their total and how to show them.
func (a *API) jobPage(ctx context.Context, f models.JobFilter, order string, after *models.JobCursor, limit int) (
	[]models.JobRow, int64, func(models.JobRow) jobJSON, error) {
	show := a.jobOf(models.Holds{}, nil)
	if f.State == models.JobDone {
		since := a.doneSince()
		jobs, err := a.Store.ListDoneJobs(ctx, f, since, order, after, limit)
		if err != nil {
			return nil, 0, nil, err
		}
		total, err := a.Store.CountDoneJobs(ctx, f, since)
		return jobs, total, show, err
	}
	// The holds first, so the list and count need not read them once per job.
	holds, err := a.Store.Holds(ctx)
	if err != nil {
		return nil, 0, nil, err
	}
	f.Held = &holds
	if f.Deferred, err = a.deferral(ctx); err != nil {
		return nil, 0, nil, err
	}
	jobs, err := a.Store.ListJobRows(ctx, f, order, after, limit)
	if err != nil {
		return nil, 0, nil, err
	}
	total, err := a.Store.CountJobs(ctx, f)
	return jobs, total, a.jobOf(holds, f.Deferred), err
}

// maxJobEvents caps the attempts one job's detail shows (newest first).
const maxJobEvents = 1000

// jobDetail answers one job with its item, author and attempts.
func (a *API) jobDetail(c echo.Context, ctx context.Context, job models.JobRow) error {
	evs, err := a.Store.ListEvents(ctx, models.EventFilter{Event: job.Task, Kind: job.Kind, ItemID: job.ItemID}, 0, maxJobEvents)
	if err != nil {
		return err
	}
	out := each(evs, eventOf)
	holds, err := a.Store.Holds(ctx)
	if err != nil {
		return err
	}
	deferred, err := a.deferral(ctx)
	if err != nil {
		return err
	}
	item := jobItem{Kind: job.Kind, ID: job.ItemID, Title: job.ItemTitle, SongID: job.SongID}
	if sub, ok, err := a.Store.ScreenSubject(ctx, job.Kind, job.ItemID); err != nil {
		return err
	} else if ok {
		item.Content = &sub.Text
	}
	return c.JSON(http.StatusOK, jobDetailJSON{Job: a.jobOf(holds, deferred)(job),
		Item:   item,
		Author: jobAuthor{ID: job.UserID, Name: job.UserName}, Events: out})
}

// getJob shows one job, owed or settled within OWED_RETAIN_DONE, with its item, author and attempts.
func (a *API) getJob(c echo.Context) error {
	job, err := a.jobInPath(c)
	if errors.Is(err, models.ErrNotFound) {
		job, err = a.Store.DoneJobByID(c.Request().Context(), job.ID, a.doneSince())
	}
	if err != nil {
		return err
	}
	return a.jobDetail(c, c.Request().Context(), job)
}

// doneSince is the oldest settling a settled job is listed for (OWED_RETAIN_DONE).
func (a *API) doneSince() time.Time { return a.now().Add(-a.Retention.Done) }

// jobInPath reads the owed job the path's {id} names (its id kept in the row even when not found).
func (a *API) jobInPath(c echo.Context) (models.JobRow, error) {
	id, err := pathID(c, "id")
	if err != nil {
		return models.JobRow{}, err
	}
	job, err := a.Store.JobByID(c.Request().Context(), id)
	job.ID = id
	return job, err
}

// retryJob makes one job due now. A job that a lease holds is running (409 leased); a job that
// waits for its author's budget stays waiting while the budget still cannot cover it (409
// budget): retrying it would only spend an attempt on the same refusal.
func (a *API) retryJob(c echo.Context) error {
	job, err := a.jobInPath(c)
	if errors.Is(err, models.ErrNotFound) {
		if _, derr := a.Store.DoneJobByID(c.Request().Context(), job.ID, a.doneSince()); derr == nil {
			return &Error{Status: http.StatusConflict, Code: "done", Message: "the job is done: it settled, and nothing is owed to retry"}
		}
	}
	if err != nil {
		return err
	}
	ctx, id := c.Request().Context(), job.ID
	if err := inReview(job.Job); err != nil {
		return err
	}
	if job.LeaseUntil != nil && job.LeaseUntil.After(a.now()) {
		return errLeased
	}
	holds, err := a.Store.Holds(ctx)
	if err != nil {
		return err
	}
	if holds.Task(job.Task) {
		return &Error{Status: http.StatusConflict, Code: "held",
			Message: "the " + string(job.Task) + " jobs are held: nothing held runs; lift the hold to run it"}
	}
	var n int64
	err = a.Store.WithTx(ctx, func(tx *models.Store) error {
		r, err := tx.RetryJobsReport(ctx, models.JobFilter{ID: id, UserID: job.UserID}) // the author: whose views to wake
		if err != nil || r.Retried == 0 {
			return err // nothing changed: nothing to record
		}
		n = r.Retried
		return audit(c, tx, models.AuditRetry, target("job", id), map[string]any{"dueAt": timeStr(job.DueAt), "why": job.Why},
			map[string]any{"dueAt": a.now().Format(timeFormat)})
	})
	if err != nil {
		return err
	}
	if n > 0 && a.Content != nil {
		a.Content.Wake() // it runs now, not at the next sweep
	}
	job, err = a.Store.JobByID(ctx, id)
	if err != nil {
		return err
	}
	if n == 0 {
		if job.LeaseUntil != nil && job.LeaseUntil.After(a.now()) {
			return errLeased
		}
		if job.Why != nil && *job.Why == models.WhyBudget {
			return &Error{Status: http.StatusConflict, Code: "budget",
				Message: "the author's budget for today cannot cover this job; it waits for the reset at " +
					string(timeStr(models.BudgetReset(a.now()))) + " (raise their limit to run it sooner)"}
		}
	}
	return a.jobDetail(c, ctx, job)
}

// retryJobs makes every job the filter selects due now, but leased ones and unaffordable ones.
func (a *API) retryJobs(c echo.Context) error {
	var req jobFilterRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	f := req.filter()
	if err := checkJobFilter(f); err != nil {
		return err
	}
	var r models.RetryReport
	err := a.Store.WithTx(c.Request().Context(), func(tx *models.Store) error {
		var err error
		if r, err = tx.RetryJobsReport(c.Request().Context(), f); err != nil || r.Retried == 0 {
			return err // nothing changed: nothing to record
		}
		return audit(c, tx, models.AuditRetryBulk, "jobs", req, map[string]any{"retried": r.Retried,
			"skipped": skippedJSON{Budget: r.SkippedBudget, Held: r.SkippedHeld}})
	})
	if err != nil {
		return err
	}
	if r.Retried > 0 && a.Content != nil {
		a.Content.Wake()
	}
	return c.JSON(http.StatusOK, retriedJSON{r.Retried, skippedJSON{Budget: r.SkippedBudget, Held: r.SkippedHeld}})
}

var errLeased = &Error{Status: http.StatusConflict, Code: "leased", Message: "the job is running now"}
