package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/owed/owed/models"
)

type songJSON struct {
	ID          int64     `json:"id"`
	Title       string    `json:"title"`
	UserID      int64     `json:"userId"`
	Art         *float64  `json:"art"`
	ScoreRubric *string   `json:"scoreRubric" description:"the rubric art was scored under (null while unscored); by art, songs under the live rubric come first, then the rest"`
	CreatedAt   timestamp `json:"createdAt"`
}

type songListJSON struct {
	NextCursor *string    `json:"nextCursor"`
	Songs      []songJSON `json:"songs"`
}

// songsQuery are the query parameters of GET /api/songs.
type songsQuery struct {
	Sort string `query:"sort" enum:"songSort" description:"art (the default: best art first, unscored songs last) or new"`
	pageQuery
}

var songSorts = []string{"art", "new"}

// songDetailJSON is a public song with its allowed revisions and comments (keys in a map's order).
type songDetailJSON struct {
	Comments  []commentJSON  `json:"comments"`
	Revisions []revisionJSON `json:"revisions"`
	Song      songJSON       `json:"song"`
}

type revisionJSON struct {
	ID        int64      `json:"id"`
	Title     string     `json:"title"`
	Code      string     `json:"code"`
	CreatedAt timestamp  `json:"createdAt"`
	Score     *scoreJSON `json:"score"`
}

type commentJSON struct {
	ID        int64     `json:"id"`
	UserID    int64     `json:"userId"`
	Body      string    `json:"body"`
	CreatedAt timestamp `json:"createdAt"`
}

type pitchJSON struct {
	ID        int64     `json:"id"`
	UserID    int64     `json:"userId"`
	Body      string    `json:"body"`
	CreatedAt timestamp `json:"createdAt"`
}

type pitchListJSON struct {
	NextCursor *string     `json:"nextCursor"`
	Pitches    []pitchJSON `json:"pitches"`
}

func songOf(s models.Song) songJSON {
	return songJSON{ID: s.ID, Title: s.Title, UserID: s.UserID, Art: s.Art, ScoreRubric: s.ScoreRubric, CreatedAt: timeStr(s.CreatedAt)}
}

// listSongs pages through public songs, best art first (sort=art, the default: the live
// rubric's first, then the rest) or newest first (sort=new).
func (a *API) listSongs(c echo.Context) error {
	sort, err := oneOf(c, "sort", songSorts...)
	if err != nil {
		return err
	}
	limit, err := queryLimit(c, 50, 200)
	if err != nil {
		return err
	}
	cur, err := pageCursor(c, func(cur models.RankedCursor) bool { return cur.ID > 0 })
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	var songs []models.Song
	rubric, byArt := "", sort != "new"
	if !byArt {
		var after *models.SongCursor
		if cur != nil {
			after = &cur.SongCursor
		}
		songs, err = a.Store.PublicSongs(ctx, false, after, limit)
	} else if rubric, err = a.Content.LiveRubric(ctx); err == nil {
		songs, err = a.Store.PublicSongsRanked(ctx, rubric, cur, limit)
	}
	if err != nil {
		return err
	}
	// By newest, Rest is false and left out: the cursor is the SongCursor it always was.
	out, next := pageOf(songs, limit, songOf, func(s models.Song) any {
		return models.RankedCursor{SongCursor: models.SongCursor{Art: s.Art, ID: s.ID}, Rest: byArt && (s.ScoreRubric == nil || *s.ScoreRubric != rubric)}
	})
	return c.JSON(http.StatusOK, songListJSON{next, out})
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
	rs := each(revs, func(r models.PublicRevision) revisionJSON {
		return revisionJSON{ID: r.ID, Title: r.Title, Code: r.Code, CreatedAt: timeStr(r.CreatedAt), Score: scoreOf(r.Score)}
	})
	cs := each(comments, func(cm models.PublicComment) commentJSON {
		return commentJSON{ID: cm.ID, UserID: cm.UserID, Body: cm.Body, CreatedAt: timeStr(cm.CreatedAt)}
	})
	return c.JSON(http.StatusOK, songDetailJSON{Song: songOf(song), Revisions: rs, Comments: cs})
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
	out, next := pageOf(ps, limit, func(p models.Pitch) pitchJSON {
		return pitchJSON{ID: p.ID, UserID: p.UserID, Body: p.Body, CreatedAt: timeStr(p.CreatedAt)}
	}, func(p models.Pitch) any { return idCursor{p.ID} })
	return c.JSON(http.StatusOK, pitchListJSON{next, out})
}
