package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/owed/owed/models"
)

type songJSON struct {
	ID        int64    `json:"id"`
	Title     string   `json:"title"`
	UserID    int64    `json:"userId"`
	Art       *float64 `json:"art"`
	CreatedAt string   `json:"createdAt"`
}

func songOf(s models.Song) songJSON {
	return songJSON{ID: s.ID, Title: s.Title, UserID: s.UserID, Art: s.Art, CreatedAt: wireTime(s.CreatedAt)}
}

// listSongs pages through public songs, best art first (sort=art, the default; unscored
// songs last) or newest first (sort=new).
func (a *API) listSongs(c echo.Context) error {
	sort, err := oneOf(c, "sort", "art", "new")
	if err != nil {
		return err
	}
	byArt := sort != "new"
	limit, err := queryLimit(c, 50, 200)
	if err != nil {
		return err
	}
	var cur models.SongCursor
	has, err := decodeCursor(c, &cur)
	if err != nil {
		return err
	}
	var after *models.SongCursor
	if has {
		if cur.ID <= 0 {
			return invalid("cursor", "cursor is not one this server gave out")
		}
		after = &cur
	}
	songs, err := a.Store.PublicSongs(c.Request().Context(), byArt, after, limit)
	if err != nil {
		return err
	}
	return page(c, "songs", songs, limit, songOf, func(s models.Song) any { return models.SongCursor{Art: s.Art, ID: s.ID} })
}

// getSong shows a public song with its allowed revisions and comments.
func (a *API) getSong(c echo.Context) error {
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	song, revs, comments, err := a.Store.PublicSong(c.Request().Context(), id)
	if err != nil {
		return err
	}
	type revJSON struct {
		ID        int64      `json:"id"`
		Title     string     `json:"title"`
		Code      string     `json:"code"`
		CreatedAt string     `json:"createdAt"`
		Score     *scoreJSON `json:"score"`
	}
	type commentJSON struct {
		ID        int64  `json:"id"`
		UserID    int64  `json:"userId"`
		Body      string `json:"body"`
		CreatedAt string `json:"createdAt"`
	}
	rs := make([]revJSON, 0, len(revs))
	for _, r := range revs {
		rs = append(rs, revJSON{ID: r.ID, Title: r.Title, Code: r.Code, CreatedAt: wireTime(r.CreatedAt), Score: scoreOf(r.Score)})
	}
	cs := make([]commentJSON, 0, len(comments))
	for _, cm := range comments {
		cs = append(cs, commentJSON{ID: cm.ID, UserID: cm.UserID, Body: cm.Body, CreatedAt: wireTime(cm.CreatedAt)})
	}
	return c.JSON(http.StatusOK, map[string]any{"song": songOf(song), "revisions": rs, "comments": cs})
}

// listPitches pages through allowed pitches, newest first.
func (a *API) listPitches(c echo.Context) error {
	limit, before, err := idPage(c, 50, 200)
	if err != nil {
		return err
	}
	ps, err := a.Store.PublicPitches(c.Request().Context(), before, limit)
	if err != nil {
		return err
	}
	type pitchJSON struct {
		ID        int64  `json:"id"`
		UserID    int64  `json:"userId"`
		Body      string `json:"body"`
		CreatedAt string `json:"createdAt"`
	}
	return page(c, "pitches", ps, limit, func(p models.Pitch) pitchJSON {
		return pitchJSON{ID: p.ID, UserID: p.UserID, Body: p.Body, CreatedAt: wireTime(p.CreatedAt)}
	}, func(p models.Pitch) any { return idCursor{p.ID} })
}
