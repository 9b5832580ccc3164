package api

import (
	"cmp"
	"context"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/owed/owed/modelclient"
	"github.com/owed/owed/models"
)

// screenJSON is where an item's screening stands, as its author sees it.
type screenJSON struct {
	State         models.ItemState `json:"state" enum:"screenState"`
	Verdict       *models.Verdict  `json:"verdict" enum:"verdict"`
	Confidence    *float64         `json:"confidence"`
	Why           *models.Why      `json:"why" enum:"why"`
	Attempts      int              `json:"attempts"`
	NextAttemptAt *timestamp       `json:"nextAttemptAt"`
}

func stateOf(verdict *models.Verdict) models.ItemState {
	switch {
	case verdict == nil:
		return models.StatePending
	case *verdict == models.VerdictAllow:
		return models.StatePublic
	}
	return models.StateBlocked
}

// screenOf shows where an item's screening stands; a breaker that cannot be read is taken as
// closed.
func (a *API) screenOf(ctx context.Context, s models.ItemScreen, h models.Holds) screenJSON {
	out := screenJSON{State: stateOf(s.Verdict), Verdict: s.Verdict, Confidence: s.Confidence}
	if s.Job != nil {
		deferred, _ := a.deferral(ctx) // the breaker's row is cached while closed
		out.Why, out.Attempts = models.ShownWhy(h, deferred, s.Job, a.now()), s.Job.Attempts
		if s.Job.Why == nil || *s.Job.Why != models.WhyReview { // a moderator decides: no next attempt
			out.NextAttemptAt = new(timeStr(s.Job.DueAt))
		}
	}
	return out
}

// screenInline runs the new, committed item's screen now and waits up to InlineWait for it; a
// failure here degrades the answer (pendingScreen), never fails it.
func (a *API) screenInline(ctx context.Context, kind models.Kind, id int64, created time.Time) screenJSON {
	done := a.Content.RunItem(models.TaskScreen, kind, id)
	timer := time.NewTimer(a.InlineWait)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
	case <-ctx.Done():
	}
	ctx = context.WithoutCancel(ctx)
	s, err := a.Store.ScreenOf(ctx, kind, id)
	if err != nil {
		a.Log.Warn("screen of a new item could not be read; answered pending", "kind", kind, "id", id, "err", err)
		return pendingScreen(created, models.WhyUnavailable)
	}
	var h models.Holds
	if s.Job != nil {
		if h, err = a.Store.Holds(ctx); err != nil {
			a.Log.Warn("holds could not be read; answered pending", "kind", kind, "id", id, "err", err)
			return pendingScreen(created, models.WhyUnavailable)
		}
	}
	return a.screenOf(ctx, s, h)
}

// pendingScreen is a new item's screen not known yet: pending since it was made, and why (nil: unknown).
func pendingScreen(created time.Time, why models.Why) screenJSON {
	out := screenJSON{State: models.StatePending, NextAttemptAt: new(timeStr(created))}
	if why != "" {
		out.Why = &why
	}
	return out
}

func checkTitle(title string, required bool) error {
	if strings.TrimSpace(title) == "" {
		if required {
			return invalid("title", "title is required")
		}
		return nil
	}
	if !utf8.ValidString(title) || strings.ContainsRune(title, 0) {
		return invalid("title", "title must be UTF-8 text without NUL bytes")
	}
	if n := utf8.RuneCountInString(title); n > modelclient.MaxTitleChars {
		return invalid("title", "title is longer than 200 characters")
	}
	return nil
}

// checkText validates a required body of text against a byte cap (413 past it).
func checkText(field, text string, max int) error {
	if strings.TrimSpace(text) == "" {
		return invalid(field, field+" is required")
	}
	if !utf8.ValidString(text) || strings.ContainsRune(text, 0) {
		return invalid(field, field+" must be UTF-8 text without NUL bytes")
	}
	if len(text) > max {
		return tooLarge(field, field+" is larger than "+humanBytes(max))
	}
	return nil
}

func humanBytes(n int) string {
	if n%1024 == 0 {
		return itoa(n/1024) + " KiB"
	}
	return itoa(n) + " bytes"
}

type songRequest struct {
	Title string `json:"title" required:"true" maxLength:"200"`
	Code  string `json:"code" required:"true" description:"at most 64 KiB"`
}

// The answers to a new item: what was made (keys in the order a map of them had) and its screen.
type (
	songCreatedJSON struct {
		Revision revisionRef `json:"revision"`
		Screen   screenJSON  `json:"screen"`
		Song     songRef     `json:"song"`
	}
	revisionCreatedJSON struct {
		Revision revisionRef `json:"revision"`
		Screen   screenJSON  `json:"screen"`
	}
	commentCreatedJSON struct {
		Comment commentRef `json:"comment"`
		Screen  screenJSON `json:"screen"`
	}
	pitchCreatedJSON struct {
		Pitch  pitchRef   `json:"pitch"`
		Screen screenJSON `json:"screen"`
	}
	songRef struct {
		ID    int64  `json:"id"`
		Title string `json:"title"`
	}
	revisionRef struct {
		ID     int64  `json:"id"`
		SongID int64  `json:"songId"`
		Title  string `json:"title"`
	}
	commentRef struct {
		ID     int64 `json:"id"`
		SongID int64 `json:"songId"`
	}
	pitchRef struct {
		ID int64 `json:"id"`
	}
)

// createItem makes an item of kind (create, for the caller) and answers it (answer) with its
// screen, run inline. Should nothing after the commit be done, the Idempotency-Key keeps the same
// answer, its screen pending, made from what the write's transaction made.
func createItem[T any](a *API, c echo.Context, kind models.Kind, create func(ctx context.Context, userID int64) (T, error),
	made func(T) (id int64, at time.Time), answer func(T, screenJSON) any) error {
	provisional(c, func(all []any) (int, any) {
		v := madeOf[T](all)
		_, at := made(v)
		return http.StatusCreated, answer(v, pendingScreen(at, ""))
	})
	ctx := c.Request().Context()
	v, err := create(ctx, caller(c).ID)
	if err != nil {
		return err
	}
	id, at := made(v)
	return c.JSON(http.StatusCreated, answer(v, a.screenInline(ctx, kind, id, at)))
}

func revisionMade(r models.Revision) (int64, time.Time) { return r.ID, r.CreatedAt }

func revisionRefOf(r models.Revision) revisionRef { return revisionRef{r.ID, r.SongID, r.Title} }

// createSong publishes a song; its first revision, of the song's title, is what is screened.
func (a *API) createSong(c echo.Context) error {
	var req songRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	if err := cmp.Or(checkTitle(req.Title, true), checkText("code", req.Code, modelclient.MaxCodeBytes)); err != nil {
		return err
	}
	return createItem(a, c, models.KindRevision, func(ctx context.Context, userID int64) (models.Revision, error) {
		_, rev, err := a.Store.CreateSong(ctx, userID, req.Title, req.Code)
		return rev, err
	}, revisionMade, func(rev models.Revision, screen screenJSON) any {
		return songCreatedJSON{Song: songRef{rev.SongID, rev.Title}, Revision: revisionRefOf(rev), Screen: screen}
	})
}

type revisionRequest struct {
	Code  string `json:"code" required:"true" description:"at most 64 KiB"`
	Title string `json:"title" maxLength:"200"`
}

func (a *API) createRevision(c echo.Context) error {
	var req revisionRequest
	songID, err := pathIDAndBody(c, &req)
	if err != nil {
		return err
	}
	if err := cmp.Or(checkTitle(req.Title, false), checkText("code", req.Code, modelclient.MaxCodeBytes)); err != nil {
		return err
	}
	return createItem(a, c, models.KindRevision, func(ctx context.Context, userID int64) (models.Revision, error) {
		return a.Store.CreateRevision(ctx, userID, songID, strings.TrimSpace(req.Title), req.Code)
	}, revisionMade, func(rev models.Revision, screen screenJSON) any {
		return revisionCreatedJSON{Revision: revisionRefOf(rev), Screen: screen}
	})
}

type bodyRequest struct {
	Body string `json:"body" required:"true" description:"at most 8 KiB"`
}

func (a *API) createComment(c echo.Context) error {
	var req bodyRequest
	songID, err := pathIDAndBody(c, &req)
	if err != nil {
		return err
	}
	if err := checkText("body", req.Body, modelclient.MaxTextBytes); err != nil {
		return err
	}
	return createItem(a, c, models.KindComment, func(ctx context.Context, userID int64) (models.Comment, error) {
		return a.Store.CreateComment(ctx, userID, songID, req.Body)
	}, func(cm models.Comment) (int64, time.Time) { return cm.ID, cm.CreatedAt }, func(cm models.Comment, screen screenJSON) any {
		return commentCreatedJSON{Comment: commentRef{cm.ID, cm.SongID}, Screen: screen}
	})
}

func (a *API) createPitch(c echo.Context) error {
	var req bodyRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	if err := checkText("body", req.Body, modelclient.MaxTextBytes); err != nil {
		return err
	}
	return createItem(a, c, models.KindPitch, func(ctx context.Context, userID int64) (models.Pitch, error) {
		return a.Store.CreatePitch(ctx, userID, req.Body)
	}, func(p models.Pitch) (int64, time.Time) { return p.ID, p.CreatedAt }, func(p models.Pitch, screen screenJSON) any {
		return pitchCreatedJSON{Pitch: pitchRef{p.ID}, Screen: screen}
	})
}

// deleteItem deletes one of the caller's own items; its owed jobs go with it (triggers).
func (a *API) deleteItem(kind models.Kind) echo.HandlerFunc {
	return func(c echo.Context) error {
		id, err := pathID(c, "id")
		if err != nil {
			return err
		}
		provisional(c, func([]any) (int, any) { return http.StatusNoContent, nil })
		err = a.Store.DeleteItem(c.Request().Context(), caller(c).ID, kind, id)
		if err != nil {
			return err
		}
		return c.NoContent(http.StatusNoContent)
	}
}

type scoreJSON struct {
	Art      float64            `json:"art"`
	ArtRuns  []float64          `json:"artRuns"`
	Criteria map[string]float64 `json:"criteria"`
	Model    string             `json:"model"`
	Rubric   string             `json:"rubric"`
}

func scoreOf(s *models.Score) *scoreJSON {
	if s == nil {
		return nil
	}
	return &scoreJSON{Art: s.Art, ArtRuns: s.ArtRuns, Criteria: s.Criteria, Model: s.Model, Rubric: s.Rubric}
}
