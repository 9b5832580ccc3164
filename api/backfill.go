package api

import (
	"bytes"
	"io"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/owed/owed/scheduler"
)

// maxBatchPauseMs caps the cooldown between batches: an hour is already a crawl.
const maxBatchPauseMs = 3_600_000

var errNoBackfill = &Error{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "the backfill queue is not running in this process"}

func (a *API) backfillStatus(c echo.Context) error {
	if a.Backfill == nil {
		return errNoBackfill
	}
	st, err := a.Backfill.Status(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, st)
}

// getBackfill is the whole queue: jobs with their members, rates, ETAs, totals, settings and
// the rate limit.
func (a *API) getBackfill(c echo.Context) error { return a.backfillStatus(c) }

type backfillTarget struct {
	ChatID *string `json:"chatId"`
}

// readTarget reads the optional {"chatId"} body of start and pause. No body at all (and no
// content type) means every job; a body that is there must be the JSON object.
func readTarget(c echo.Context) (string, error) {
	req := c.Request()
	body, err := io.ReadAll(req.Body)
	if err != nil {
		if bodyTooLarge(err) {
			return "", tooLarge("", "the request body is too large")
		}
		return "", invalid("", "the request body could not be read")
	}
	if len(body) == 0 && req.Header.Get(echo.HeaderContentType) == "" {
		return "", nil
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
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

// startBackfill starts every job with pending rows (smallest first) or one chat's, and
// answers the status.
func (a *API) startBackfill(c echo.Context) error {
	chat, err := readTarget(c)
	if err != nil {
		return err
	}
	if a.Backfill == nil {
		return errNoBackfill
	}
	if err := a.Backfill.StartJobs(c.Request().Context(), chat); err != nil {
		return err
	}
	return a.backfillStatus(c)
}

// pauseBackfill pauses every running or queued job, or one chat's, after its current batch,
// and answers the status.
func (a *API) pauseBackfill(c echo.Context) error {
	chat, err := readTarget(c)
	if err != nil {
		return err
	}
	if a.Backfill == nil {
		return errNoBackfill
	}
	if err := a.Backfill.PauseJobs(c.Request().Context(), chat); err != nil {
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
	return c.JSON(http.StatusOK, s)
}

type backfillSettingsRequest struct {
	BatchSize    *int   `json:"batchSize"`
	BatchPauseMs *int64 `json:"batchPauseMs"`
	Auto         *bool  `json:"auto"`
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
	return a.backfillStatus(c)
}
