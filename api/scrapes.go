package api

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/owed/owed/models"
	"github.com/owed/owed/outbound"
)

// Limits of what the bot pushes.
const (
	// maxCount bounds every count an integration sends: the largest integer JSON reads exactly.
	maxCount        = 1<<53 - 1
	maxMediaPerPush = 1000
	maxURLLength    = 4096
	maxChatIDLength = 100
)

// backendName is the shape of a backend (the bot account kind) and a scrape mode.
var backendName = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,31}$`)

var errScrapeDeleting = &Error{Status: http.StatusConflict, Code: "conflict", Message: "the scrape is being deleted"}

type scrapeCountsJSON struct {
	Pending       int64             `json:"pending"`
	Cached        int64             `json:"cached"`
	Failed        int64             `json:"failed"`
	Suspect       int64             `json:"suspect"`
	Unverified    int64             `json:"unverified"`
	Skipped       int64             `json:"skipped"`
	Total         int64             `json:"total"`
	StoredBytes   int64             `json:"storedBytes"`
	PendingByKind models.KindCounts `json:"pendingByKind"`
}

type scrapeJSON struct {
	ID         int64              `json:"id"`
	ChatID     string             `json:"chatId"`
	GuildID    *string            `json:"guildId"`
	Backend    string             `json:"backend"`
	Mode       string             `json:"mode"`
	State      models.ScrapeState `json:"state" enum:"scrapeState"`
	Downloaded int64              `json:"downloaded"`
	PushedAt   timestamp          `json:"pushedAt"`
	CreatedAt  timestamp          `json:"createdAt"`
	UpdatedAt  timestamp          `json:"updatedAt"`
	Counts     scrapeCountsJSON   `json:"counts"`
}

type scrapeListJSON struct {
	NextCursor *string      `json:"nextCursor"`
	Scrapes    []scrapeJSON `json:"scrapes"`
}

// scrapesQuery are the query parameters of GET /api/scrapes.
type scrapesQuery struct {
	ChatID string             `query:"chatId" maxLength:"100"`
	State  models.ScrapeState `query:"state" enum:"scrapeListable"`
	pageQuery
}

type mediaListJSON struct {
	Media      []mediaJSON `json:"media"`
	NextCursor *string     `json:"nextCursor"`
}

// scrapeMediaQuery are the query parameters of a scrape's media list.
type scrapeMediaQuery struct {
	State models.MediaState `query:"state" enum:"mediaState"`
	pageQuery
}

type acceptedJSON struct {
	Accepted int `json:"accepted"`
}

func scrapeOf(s models.Scrape) scrapeJSON {
	return scrapeJSON{ID: s.ID, ChatID: s.ChatID, GuildID: s.GuildID, Backend: s.Backend, Mode: s.Mode, State: s.State,
		Downloaded: s.Downloaded, PushedAt: timeStr(s.PushedAt), CreatedAt: timeStr(s.CreatedAt), UpdatedAt: timeStr(s.UpdatedAt),
		Counts: scrapeCountsJSON(s.Counts)}
}

type mediaJSON struct {
	ID          int64             `json:"id"`
	ScrapeID    int64             `json:"scrapeId"`
	Kind        models.MediaKind  `json:"kind" enum:"mediaKind"`
	URL         string            `json:"url"`
	Bytes       *int64            `json:"bytes"`
	State       models.MediaState `json:"state" enum:"mediaState"`
	StoredBytes int64             `json:"storedBytes"`
	UpdatedAt   timestamp         `json:"updatedAt"`
	PreviewURL  *string           `json:"previewUrl"`
}

func mediaOf(m models.Media) mediaJSON {
	out := mediaJSON{ID: m.ID, ScrapeID: m.ScrapeID, Kind: m.Kind, URL: m.URL, Bytes: m.Bytes, State: m.State,
		StoredBytes: m.StoredBytes, UpdatedAt: timeStr(m.UpdatedAt)}
	if m.State == models.MediaCached {
		out.PreviewURL = new(fmt.Sprintf("/api/media/%d/preview", m.ID))
	}
	return out
}

// checkID validates a chat's or guild's identifier: 1..100 printable characters.
func checkID(field string, v string) error {
	if strings.TrimSpace(v) == "" {
		return invalid(field, field+" is required")
	}
	if !utf8.ValidString(v) {
		// A query parameter is not checked like a JSON body is; PostgreSQL refuses bad UTF-8.
		return invalid(field, field+" must be UTF-8 text")
	}
	if utf8.RuneCountInString(v) > maxChatIDLength {
		return invalid(field, fmt.Sprintf("%s must be at most %d characters", field, maxChatIDLength))
	}
	for _, r := range v {
		if !unicode.IsPrint(r) {
			return invalid(field, field+" must hold printable characters only")
		}
	}
	return nil
}

type scrapeRequest struct {
	ChatID  *string `json:"chatId" required:"true" maxLength:"100"`
	GuildID *string `json:"guildId" nullable:"true" maxLength:"100"`
	Backend *string `json:"backend" required:"true" pattern:"backendName" description:"the bot account kind, e.g. puppet or slopbot"`
	Mode    *string `json:"mode" required:"true" pattern:"backendName"`
}

// createScrape records a scrape the bot starts: active, holding the walk lock.
func (a *API) createScrape(c echo.Context) error {
	var req scrapeRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	if req.ChatID == nil {
		return invalid("chatId", "chatId is required")
	}
	if err := checkID("chatId", *req.ChatID); err != nil {
		return err
	}
	if req.GuildID != nil {
		if err := checkID("guildId", *req.GuildID); err != nil {
			return err
		}
	}
	for _, f := range []struct {
		name string
		v    *string
	}{{"backend", req.Backend}, {"mode", req.Mode}} {
		if f.v == nil {
			return invalid(f.name, f.name+" is required")
		}
		if !backendName.MatchString(*f.v) {
			return invalid(f.name, f.name+" must be 1 to 32 lowercase letters, digits, '.', '_' or '-'")
		}
	}
	sc, err := a.Store.CreateScrape(c.Request().Context(), models.NewScrape{ChatID: *req.ChatID, GuildID: req.GuildID,
		Backend: *req.Backend, Mode: *req.Mode})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, scrapeOf(sc))
}

// getScrape shows one scrape with its counts (a deleted one too: its tombstone).
func (a *API) getScrape(c echo.Context) error {
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	sc, err := a.Store.ScrapeByID(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, scrapeOf(sc))
}

// listableScrapeStates are the states a list may filter on: deleted scrapes leave lists.
var listableScrapeStates = models.ScrapeStates[:len(models.ScrapeStates)-1]

// listScrapes pages through scrapes with their counts, by id.
func (a *API) listScrapes(c echo.Context) error {
	state, err := oneOf(c, "state", listableScrapeStates...)
	if err != nil {
		return err
	}
	chat := c.QueryParam("chatId")
	if chat != "" {
		if err := checkID("chatId", chat); err != nil {
			return err
		}
	}
	limit, after, err := idPage(c, 50, 500)
	if err != nil {
		return err
	}
	rows, err := a.Store.ListScrapes(c.Request().Context(), models.ScrapeFilter{ChatID: chat, State: state}, after, limit)
	if err != nil {
		return err
	}
	out, next := pageOf(rows, limit, scrapeOf, func(s models.Scrape) any { return idCursor{s.ID} })
	return c.JSON(http.StatusOK, scrapeListJSON{next, out})
}

type mediaItemRequest struct {
	URL   *string           `json:"url" required:"true" format:"uri" maxLength:"4096" description:"http or https"`
	Kind  *models.MediaKind `json:"kind" required:"true" enum:"mediaKind"`
	Bytes *int64            `json:"bytes" minimum:"0" maximum:"9007199254740991" description:"the declared size"`
}

type mediaPushRequest struct {
	Media []mediaItemRequest `json:"media" required:"true" minItems:"1" maxItems:"1000"`
}

// checkMediaURL accepts absolute http(s) URLs with a host, of a sane length; unless
// allowPrivate, a host written as an address must be a public one (a name is judged when it is
// fetched, on the address it resolves to).
func checkMediaURL(field, raw string, allowPrivate bool) error {
	if len(raw) > maxURLLength {
		return invalid(field, fmt.Sprintf("%s must be at most %d bytes", field, maxURLLength))
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return invalid(field, field+" must be an http or https URL")
	}
	if err := (outbound.Options{AllowPrivate: allowPrivate}).CheckURL(u); err != nil {
		return invalid(field, field+"'s host is not a public address: loopback, private, link-local or otherwise reserved (set OWED_MEDIA_ALLOW_PRIVATE to allow it)")
	}
	for _, r := range raw {
		if r <= ' ' || r == 0x7f {
			return invalid(field, field+" must not hold spaces or control characters")
		}
	}
	return nil
}

// pushMedia adds up to 1,000 pending media rows to a scrape, all or none, refreshing its last push.
func (a *API) pushMedia(c echo.Context) error {
	var req mediaPushRequest
	id, err := pathIDAndBody(c, &req)
	if err != nil {
		return err
	}
	switch {
	case len(req.Media) == 0:
		return invalid("media", "media must list 1 to 1000 rows")
	case len(req.Media) > maxMediaPerPush:
		return tooLarge("media", fmt.Sprintf("at most %d media rows per call", maxMediaPerPush))
	}
	items := make([]models.NewMedia, len(req.Media))
	for i, m := range req.Media {
		at := fmt.Sprintf("media[%d]", i)
		if m.URL == nil {
			return invalid(at+".url", at+".url is required")
		}
		if err := checkMediaURL(at+".url", *m.URL, a.MediaAllowPrivate); err != nil {
			return err
		}
		if m.Kind == nil || !slices.Contains(models.MediaKinds, *m.Kind) {
			return invalid(at+".kind", at+".kind must be one of "+strings.Join(names(models.MediaKinds), ", "))
		}
		if m.Bytes != nil && (*m.Bytes < 0 || *m.Bytes > maxCount) {
			return invalid(at+".bytes", at+".bytes must be a whole number from 0 to 9007199254740991 (2^53-1)")
		}
		items[i] = models.NewMedia{Kind: *m.Kind, URL: *m.URL, Bytes: m.Bytes}
	}
	n, err := a.Store.AddMedia(c.Request().Context(), id, items)
	switch {
	case errors.Is(err, models.ErrConflict):
		return errScrapeDeleting
	case err != nil:
		return err
	}
	return c.JSON(http.StatusAccepted, acceptedJSON{n})
}

type scrapePatch struct {
	State      *models.ScrapeState `json:"state" enum:"scrapeSettable"`
	Downloaded *int64              `json:"downloaded" minimum:"0" maximum:"9007199254740991"`
}

// settableScrapeStates are the states the bot may set (the delete states through DELETE only).
var settableScrapeStates = []models.ScrapeState{models.ScrapeActive, models.ScrapePaused, models.ScrapeDone, models.ScrapeFailed}

// patchScrape changes a scrape's state and/or its downloaded count.
func (a *API) patchScrape(c echo.Context) error {
	var req scrapePatch
	id, err := pathIDAndBody(c, &req)
	if err != nil {
		return err
	}
	if req.State == nil && req.Downloaded == nil {
		return invalid("state", "give a state, a downloaded count, or both")
	}
	if req.State != nil && !slices.Contains(settableScrapeStates, *req.State) {
		return invalid("state", "state must be one of "+strings.Join(names(settableScrapeStates), ", "))
	}
	if req.Downloaded != nil && (*req.Downloaded < 0 || *req.Downloaded > maxCount) {
		return invalid("downloaded", "downloaded must be a whole number from 0 to 9007199254740991 (2^53-1)")
	}
	sc, err := a.Store.UpdateScrape(c.Request().Context(), id, req.State, req.Downloaded)
	switch {
	case errors.Is(err, models.ErrConflict):
		return errScrapeDeleting
	case err != nil:
		return err
	}
	if a.Backfill != nil {
		// A scrape that stops walking may end the walk lock the queue waits on.
		a.Backfill.Kick()
	}
	return c.JSON(http.StatusOK, scrapeOf(sc))
}

// deleteScrape answers at once (pending-delete); the previews and rows go in the background.
func (a *API) deleteScrape(c echo.Context) error {
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	sc, err := a.Store.RequestScrapeDelete(c.Request().Context(), id)
	if err != nil {
		return err
	}
	if a.Backfill != nil {
		a.Backfill.KickDeletes()
	}
	return c.JSON(http.StatusAccepted, scrapeOf(sc))
}

// listScrapeMedia pages through a scrape's media rows, by id, optionally in one state.
func (a *API) listScrapeMedia(c echo.Context) error {
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	state, err := oneOf(c, "state", models.MediaStates...)
	if err != nil {
		return err
	}
	limit, after, err := idPage(c, 100, 1000)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	if _, err := a.Store.ScrapeByID(ctx, id); err != nil {
		return err
	}
	rows, err := a.Store.ListMedia(ctx, id, state, after, limit)
	if err != nil {
		return err
	}
	out, next := pageOf(rows, limit, mediaOf, func(m models.Media) any { return idCursor{m.ID} })
	return c.JSON(http.StatusOK, mediaListJSON{out, next})
}

// mediaPreview serves a cached JPEG preview, its file found from the row's id alone.
func (a *API) mediaPreview(c echo.Context) error {
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	m, err := a.Store.MediaByID(c.Request().Context(), id)
	if errors.Is(err, models.ErrNotFound) || (err == nil && m.State != models.MediaCached) || a.Media == nil {
		return notFound("preview")
	} else if err != nil {
		return err
	}
	f, err := os.Open(a.Media.PreviewPath(m.ID))
	if errors.Is(err, os.ErrNotExist) {
		return notFound("preview")
	} else if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, "image/jpeg")
	// A row's preview never changes once cached; it only goes away with the row.
	h.Set("Cache-Control", "private, max-age=86400")
	h.Set("X-Content-Type-Options", "nosniff")
	http.ServeContent(c.Response(), c.Request(), "", info.ModTime(), f)
	return nil
}
