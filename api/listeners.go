package api

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
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
	State         string   `json:"state"`
	Verdict       *string  `json:"verdict"`
	Confidence    *float64 `json:"confidence"`
	Why           *string  `json:"why"`
	Attempts      int      `json:"attempts"`
	NextAttemptAt *string  `json:"nextAttemptAt"`
}

func stateOf(verdict *string) string {
	switch {
	case verdict == nil:
		return "pending"
	case *verdict == models.VerdictAllow:
		return "public"
	}
	return "blocked"
}

func screenOf(s models.ItemScreen) screenJSON {
	out := screenJSON{State: stateOf(s.Verdict), Verdict: s.Verdict, Confidence: s.Confidence}
	if s.Job != nil {
		out.Why, out.Attempts = s.Job.Why, s.Job.Attempts
		next := msTime(s.Job.DueAt)
		out.NextAttemptAt = &next
	}
	return out
}

// screenInline runs the new item's screen now and waits up to InlineWait for it, so the author
// sees the verdict, or why it waits, in the answer. The screen goes on if the wait runs out.
func (a *API) screenInline(ctx context.Context, kind string, id int64) (screenJSON, error) {
	done := a.Content.RunItem(models.TaskScreen, kind, id)
	timer := time.NewTimer(a.InlineWait)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
	case <-ctx.Done():
	}
	s, err := a.Store.ScreenOf(context.WithoutCancel(ctx), kind, id)
	return screenOf(s), err
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
	Title string `json:"title"`
	Code  string `json:"code"`
}

func (a *API) createSong(c echo.Context) error {
	var req songRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	if err := checkTitle(req.Title, true); err != nil {
		return err
	}
	if err := checkText("code", req.Code, modelclient.MaxCodeBytes); err != nil {
		return err
	}
	ctx := c.Request().Context()
	song, rev, err := a.Store.CreateSong(ctx, caller(c).ID, req.Title, req.Code)
	if err != nil {
		return err
	}
	screen, err := a.screenInline(ctx, models.KindRevision, rev.ID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, map[string]any{
		"song":     map[string]any{"id": song.ID, "title": song.Title},
		"revision": map[string]any{"id": rev.ID, "songId": rev.SongID, "title": rev.Title},
		"screen":   screen,
	})
}

type revisionRequest struct {
	Code  string `json:"code"`
	Title string `json:"title"`
}

func (a *API) createRevision(c echo.Context) error {
	songID, err := pathID(c, "id")
	if err != nil {
		return err
	}
	var req revisionRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	if err := checkTitle(req.Title, false); err != nil {
		return err
	}
	if err := checkText("code", req.Code, modelclient.MaxCodeBytes); err != nil {
		return err
	}
	ctx := c.Request().Context()
	rev, err := a.Store.CreateRevision(ctx, caller(c).ID, songID, strings.TrimSpace(req.Title), req.Code)
	if errors.Is(err, models.ErrNotFound) {
		return notFound("song")
	} else if err != nil {
		return err
	}
	screen, err := a.screenInline(ctx, models.KindRevision, rev.ID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, map[string]any{
		"revision": map[string]any{"id": rev.ID, "songId": rev.SongID, "title": rev.Title},
		"screen":   screen,
	})
}

type bodyRequest struct {
	Body string `json:"body"`
}

func (a *API) createComment(c echo.Context) error {
	songID, err := pathID(c, "id")
	if err != nil {
		return err
	}
	var req bodyRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	if err := checkText("body", req.Body, modelclient.MaxTextBytes); err != nil {
		return err
	}
	ctx := c.Request().Context()
	cm, err := a.Store.CreateComment(ctx, caller(c).ID, songID, req.Body)
	if errors.Is(err, models.ErrNotFound) {
		return notFound("song")
	} else if err != nil {
		return err
	}
	screen, err := a.screenInline(ctx, models.KindComment, cm.ID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, map[string]any{
		"comment": map[string]any{"id": cm.ID, "songId": cm.SongID},
		"screen":  screen,
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
	ctx := c.Request().Context()
	p, err := a.Store.CreatePitch(ctx, caller(c).ID, req.Body)
	if err != nil {
		return err
	}
	screen, err := a.screenInline(ctx, models.KindPitch, p.ID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, map[string]any{"pitch": map[string]any{"id": p.ID}, "screen": screen})
}

// deleteItem deletes one of the caller's own items; its owed jobs go with it (triggers).
func (a *API) deleteItem(kind string) echo.HandlerFunc {
	return func(c echo.Context) error {
		id, err := pathID(c, "id")
		if err != nil {
			return err
		}
		err = a.Store.DeleteItem(c.Request().Context(), caller(c).ID, kind, id)
		if errors.Is(err, models.ErrNotFound) {
			return notFound(kind)
		} else if err != nil {
			return err
		}
		return c.NoContent(http.StatusNoContent)
	}
}

type jobBrief struct {
	Task          string  `json:"task"`
	Why           *string `json:"why"`
	Attempts      int     `json:"attempts"`
	NextAttemptAt string  `json:"nextAttemptAt"`
}

type mineItem struct {
	Kind       string     `json:"kind"`
	ID         int64      `json:"id"`
	SongID     *int64     `json:"songId,omitempty"`
	Title      string     `json:"title,omitempty"`
	CreatedAt  string     `json:"createdAt"`
	State      string     `json:"state"`
	Verdict    *string    `json:"verdict"`
	Confidence *float64   `json:"confidence"`
	Score      *scoreJSON `json:"score"`
	Jobs       []jobBrief `json:"jobs"`
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

type budgetJSON struct {
	Limit    int64  `json:"limit"`
	Spent    int64  `json:"spent"`
	ResetsAt string `json:"resetsAt"`
}

// mine lists the caller's own items with their verdicts, scores, owed jobs and budget, and
// starts a background run of their due jobs (never delaying this answer). It answers 304 when
// nothing changed since the ETag the client holds.
func (a *API) mine(c echo.Context) error {
	u := caller(c)
	a.Content.SweepAuthor(u.ID)
	ctx := c.Request().Context()
	items, err := a.Store.Mine(ctx, u.ID)
	if err != nil {
		return err
	}
	now := a.now()
	spent, err := a.Store.Spent(ctx, u.ID, now)
	if err != nil {
		return err
	}
	limit := a.DailyBudget
	if u.DailyLimit != nil {
		limit = *u.DailyLimit
	}
	out := struct {
		Items  []mineItem `json:"items"`
		Budget budgetJSON `json:"budget"`
	}{Items: make([]mineItem, 0, len(items)), Budget: budgetJSON{Limit: limit, Spent: spent, ResetsAt: timeStr(models.BudgetReset(now))}}
	for _, it := range items {
		m := mineItem{Kind: it.Kind, ID: it.ID, SongID: it.SongID, Title: it.Title, CreatedAt: msTime(it.CreatedAt),
			State: stateOf(it.Verdict), Verdict: it.Verdict, Confidence: it.Confidence, Score: scoreOf(it.Score),
			Jobs: make([]jobBrief, 0, len(it.Jobs))}
		for _, j := range it.Jobs {
			m.Jobs = append(m.Jobs, jobBrief{Task: j.Task, Why: j.Why, Attempts: j.Attempts, NextAttemptAt: msTime(j.DueAt)})
		}
		out.Items = append(out.Items, m)
	}
	return jsonWithETag(c, out)
}

// jsonWithETag answers v with a strong ETag of its bytes, or 304 when the client has them.
func jsonWithETag(c echo.Context, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(body)
	etag := `"` + base64.RawURLEncoding.EncodeToString(sum[:18]) + `"`
	res := c.Response()
	res.Header().Set("ETag", etag)
	res.Header().Set("Cache-Control", "private, no-cache")
	for _, t := range strings.Split(c.Request().Header.Get("If-None-Match"), ",") {
		if t = strings.TrimSpace(t); t == etag || t == "W/"+etag || t == "*" {
			return c.NoContent(http.StatusNotModified)
		}
	}
	return c.JSONBlob(http.StatusOK, body)
}
