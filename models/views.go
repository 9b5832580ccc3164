package models

import (
	"context"
	"time"
)

// MineItem is one of an author's own items with its verdict, score and owed jobs.
type MineItem struct {
	Kind       string
	ID         int64
	SongID     *int64
	Title      string
	CreatedAt  int64
	Verdict    *string
	Confidence *float64
	Score      *Score
	Jobs       []Job
}

type mineRow struct {
	ID         int64    `gorm:"column:id"`
	SongID     *int64   `gorm:"column:song_id"`
	Title      string   `gorm:"column:title"`
	CreatedAt  int64    `gorm:"column:created_at"`
	Verdict    *string  `gorm:"column:verdict"`
	Confidence *float64 `gorm:"column:confidence"`
	Art        *float64 `gorm:"column:art"`
	ArtRuns    *string  `gorm:"column:art_runs"`
	Criteria   *string  `gorm:"column:criteria"`
	Model      *string  `gorm:"column:model"`
	Rubric     *string  `gorm:"column:rubric"`
}

// mineLimit caps each kind of an author's items in one view: the newest are the ones they watch.
const mineLimit = 500

// Mine lists the author's own items, newest first within each kind, with their verdicts,
// scores and owed jobs.
func (s *Store) Mine(ctx context.Context, userID int64) ([]MineItem, error) {
	db := s.read.WithContext(ctx)
	queries := []struct{ kind, sql string }{
		{KindRevision, `SELECT r.id, r.song_id, r.title, r.created_at, s.verdict, s.confidence,
			sc.art, sc.art_runs, sc.criteria, sc.model, sc.rubric
			FROM revisions r LEFT JOIN screens s ON s.kind = 'revision' AND s.item_id = r.id
			LEFT JOIN scores sc ON sc.revision_id = r.id
			WHERE r.user_id = ? ORDER BY r.id DESC LIMIT ?`},
		{KindComment, `SELECT c.id, c.song_id, '' AS title, c.created_at, s.verdict, s.confidence
			FROM comments c LEFT JOIN screens s ON s.kind = 'comment' AND s.item_id = c.id
			WHERE c.user_id = ? ORDER BY c.id DESC LIMIT ?`},
		{KindPitch, `SELECT p.id, NULL AS song_id, '' AS title, p.created_at, s.verdict, s.confidence
			FROM pitches p LEFT JOIN screens s ON s.kind = 'pitch' AND s.item_id = p.id
			WHERE p.user_id = ? ORDER BY p.id DESC LIMIT ?`},
	}
	jobs, err := s.JobsOfUser(ctx, userID)
	if err != nil {
		return nil, err
	}
	type key struct {
		kind string
		id   int64
	}
	byItem := map[key][]Job{}
	for _, j := range jobs {
		k := key{j.Kind, j.ItemID}
		byItem[k] = append(byItem[k], j)
	}
	var items []MineItem
	for _, q := range queries {
		var rows []mineRow
		if err := db.Raw(q.sql, userID, mineLimit).Scan(&rows).Error; err != nil {
			return nil, err
		}
		for _, r := range rows {
			it := MineItem{Kind: q.kind, ID: r.ID, SongID: r.SongID, Title: r.Title, CreatedAt: r.CreatedAt,
				Verdict: r.Verdict, Confidence: r.Confidence, Jobs: byItem[key{q.kind, r.ID}]}
			if r.Art != nil {
				sc := scoreRow{RevisionID: r.ID, Art: *r.Art, ArtRuns: deref(r.ArtRuns), Criteria: deref(r.Criteria),
					Model: deref(r.Model), Rubric: deref(r.Rubric)}.score()
				it.Score = &sc
			}
			items = append(items, it)
		}
	}
	return items, nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// SongCursor is where a page of public songs continues.
type SongCursor struct {
	Art *float64 `json:"a,omitempty"`
	ID  int64    `json:"i"`
}

// publicSongColumns read a song with the title of its newest allowed revision: a revision's
// new title (songs.title follows the latest written) is public only once that revision is.
const publicSongColumns = `id, user_id, public, art, created_at, COALESCE((SELECT r.title FROM revisions r
	JOIN screens sc ON sc.kind = 'revision' AND sc.item_id = r.id AND sc.verdict = 'allow'
	WHERE r.song_id = songs.id ORDER BY r.id DESC LIMIT 1), title) AS title`

// PublicSongs lists public songs, by art (best first, unscored last) or newest first, after the
// cursor.
func (s *Store) PublicSongs(ctx context.Context, byArt bool, after *SongCursor, limit int) ([]Song, error) {
	q := s.read.WithContext(ctx).Table("songs").Select(publicSongColumns).Where("public = 1")
	if byArt {
		if after != nil {
			if after.Art != nil {
				q = q.Where("(art < ? OR (art = ? AND id < ?) OR art IS NULL)", *after.Art, *after.Art, after.ID)
			} else {
				q = q.Where("art IS NULL AND id < ?", after.ID)
			}
		}
		if s.dialect == Postgres {
			q = q.Order("art DESC NULLS LAST, id DESC")
		} else {
			q = q.Order("art DESC, id DESC") // SQLite sorts NULL lowest: last when descending
		}
	} else {
		if after != nil {
			q = q.Where("id < ?", after.ID)
		}
		q = q.Order("id DESC")
	}
	var songs []Song
	err := q.Limit(limit).Find(&songs).Error
	return songs, err
}

// PublicRevision is an allowed revision of a public song.
type PublicRevision struct {
	ID        int64  `gorm:"column:id"`
	Title     string `gorm:"column:title"`
	Code      string `gorm:"column:code"`
	CreatedAt int64  `gorm:"column:created_at"`
	Score     *Score `gorm:"-"`
}

// PublicComment is an allowed comment.
type PublicComment struct {
	ID        int64  `gorm:"column:id"`
	UserID    int64  `gorm:"column:user_id"`
	Body      string `gorm:"column:body"`
	CreatedAt int64  `gorm:"column:created_at"`
}

// PublicSong reads a public song with its allowed revisions (newest first) and allowed comments.
func (s *Store) PublicSong(ctx context.Context, id int64) (Song, []PublicRevision, []PublicComment, error) {
	song, err := s.SongByID(ctx, id)
	if err != nil {
		return Song{}, nil, nil, err
	}
	if song.Public == 0 {
		return Song{}, nil, nil, ErrNotFound
	}
	db := s.read.WithContext(ctx)
	var revs []PublicRevision
	if err := db.Raw(`SELECT r.id, r.title, r.code, r.created_at FROM revisions r
		JOIN screens s ON s.kind = 'revision' AND s.item_id = r.id AND s.verdict = 'allow'
		WHERE r.song_id = ? ORDER BY r.id DESC LIMIT 50`, id).Scan(&revs).Error; err != nil {
		return Song{}, nil, nil, err
	}
	if len(revs) > 0 {
		song.Title = revs[0].Title // the newest allowed revision's, as PublicSongs shows it
	}
	var scores []scoreRow
	if err := db.Raw(`SELECT * FROM scores WHERE song_id = ?`, id).Scan(&scores).Error; err != nil {
		return Song{}, nil, nil, err
	}
	for _, sr := range scores {
		for i := range revs {
			if revs[i].ID == sr.RevisionID {
				sc := sr.score()
				revs[i].Score = &sc
			}
		}
	}
	var comments []PublicComment
	if err := db.Raw(`SELECT c.id, c.user_id, c.body, c.created_at FROM comments c
		JOIN screens s ON s.kind = 'comment' AND s.item_id = c.id AND s.verdict = 'allow'
		WHERE c.song_id = ? ORDER BY c.id DESC LIMIT 200`, id).Scan(&comments).Error; err != nil {
		return Song{}, nil, nil, err
	}
	return song, revs, comments, nil
}

// PublicPitches lists allowed pitches newest first, before the id beforeID (0: from the newest).
func (s *Store) PublicPitches(ctx context.Context, beforeID int64, limit int) ([]Pitch, error) {
	var out []Pitch
	q := `SELECT p.id, p.user_id, p.body, p.created_at FROM screens s JOIN pitches p ON p.id = s.item_id
		WHERE s.kind = 'pitch' AND s.verdict = 'allow'`
	args := []any{}
	if beforeID > 0 {
		q += ` AND s.item_id < ?`
		args = append(args, beforeID)
	}
	q += ` ORDER BY s.item_id DESC LIMIT ?`
	args = append(args, limit)
	err := s.read.WithContext(ctx).Raw(q, args...).Scan(&out).Error
	return out, err
}

// JobStats summarises the owed work for the admin overview.
type JobStats struct {
	Total       int64
	Due         int64
	Leased      int64
	ByWhy       map[string]int64 // "none" for jobs that are simply due or new
	ByTask      map[string]int64
	OldestDueAt *int64
}

// Stats counts owed jobs.
func (s *Store) Stats(ctx context.Context) (JobStats, error) {
	now := s.nowMs()
	db := s.read.WithContext(ctx)
	st := JobStats{ByWhy: map[string]int64{"none": 0}, ByTask: map[string]int64{TaskScreen: 0, TaskScore: 0}}
	for _, w := range Whys {
		st.ByWhy[w] = 0
	}
	pairs, err := s.JobsByTaskWhy(ctx)
	if err != nil {
		return st, err
	}
	for k, n := range pairs {
		st.Total += n
		st.ByTask[k[0]] += n
		st.ByWhy[k[1]] += n
	}
	var agg struct {
		Due    int64  `gorm:"column:due"`
		Leased int64  `gorm:"column:leased"`
		Oldest *int64 `gorm:"column:oldest"`
	}
	err = db.Raw(`SELECT
		(SELECT COUNT(*) FROM content_jobs WHERE due_at <= ? AND (lease_until IS NULL OR lease_until <= ?)) AS due,
		(SELECT COUNT(*) FROM content_jobs WHERE lease_until > ?) AS leased,
		(SELECT MIN(due_at) FROM content_jobs WHERE due_at <= ? AND (lease_until IS NULL OR lease_until <= ?)) AS oldest`,
		now, now, now, now, now).Scan(&agg).Error
	st.Due, st.Leased, st.OldestDueAt = agg.Due, agg.Leased, agg.Oldest
	return st, err
}

// Settled is one minute's attempts by outcome.
type Settled struct {
	Minute int64 // epoch ms of the minute's start
	Screen int64 // verdicts recorded
	Score  int64 // scores recorded
	Put    int64 // attempts that left the job pending
}

// SettledPerMinute counts the attempts of each of the last n minutes, oldest first.
func (s *Store) SettledPerMinute(ctx context.Context, n int) ([]Settled, error) {
	now := s.Now()
	end := now.Truncate(time.Minute).UnixMilli() + 60000
	start := end - int64(n)*60000
	var rows []struct {
		M       int64  `gorm:"column:m"`
		Event   string `gorm:"column:event"`
		Outcome string `gorm:"column:outcome"`
		N       int64  `gorm:"column:n"`
	}
	if err := s.read.WithContext(ctx).Raw(`SELECT at / 60000 AS m, event, outcome, COUNT(*) AS n FROM events
		WHERE at >= ? GROUP BY at / 60000, event, outcome`, start).Scan(&rows).Error; err != nil {
		return nil, err
	}
	out := make([]Settled, n)
	for i := range out {
		out[i].Minute = start + int64(i)*60000
	}
	for _, r := range rows {
		i := int((r.M*60000 - start) / 60000)
		if i < 0 || i >= n {
			continue
		}
		switch {
		case r.Outcome == "pending":
			out[i].Put += r.N
		case r.Event == TaskScore:
			out[i].Score += r.N
		default:
			out[i].Screen += r.N
		}
	}
	return out, nil
}

// ItemScreen is where an item's screening stands: its verdict, or its owed screen job.
type ItemScreen struct {
	Verdict    *string
	Confidence *float64
	Job        *Job
}

// ScreenOf reads an item's verdict and screen job.
func (s *Store) ScreenOf(ctx context.Context, kind string, id int64) (ItemScreen, error) {
	var out ItemScreen
	var rows []struct {
		Verdict    string  `gorm:"column:verdict"`
		Confidence float64 `gorm:"column:confidence"`
	}
	db := s.db.WithContext(ctx) // the writer: the answer to a write must see that write
	if err := db.Raw(`SELECT verdict, confidence FROM screens WHERE kind = ? AND item_id = ?`, kind, id).Scan(&rows).Error; err != nil {
		return out, err
	}
	if len(rows) > 0 {
		out.Verdict, out.Confidence = &rows[0].Verdict, &rows[0].Confidence
		return out, nil
	}
	var jobs []Job
	if err := db.Raw(`SELECT `+jobColumns+` FROM content_jobs WHERE task = 'screen' AND kind = ? AND item_id = ?`, kind, id).Scan(&jobs).Error; err != nil {
		return out, err
	}
	if len(jobs) > 0 {
		out.Job = &jobs[0]
	}
	return out, nil
}

// JobsByTaskWhy counts owed jobs by task and why ("none" when a job has no why).
func (s *Store) JobsByTaskWhy(ctx context.Context) (map[[2]string]int64, error) {
	var groups []struct {
		Task string  `gorm:"column:task"`
		Why  *string `gorm:"column:why"`
		N    int64   `gorm:"column:n"`
	}
	if err := s.read.WithContext(ctx).Raw(`SELECT task, why, COUNT(*) AS n FROM content_jobs GROUP BY task, why`).Scan(&groups).Error; err != nil {
		return nil, err
	}
	out := map[[2]string]int64{}
	for _, g := range groups {
		w := "none"
		if g.Why != nil {
			w = *g.Why
		}
		out[[2]string{g.Task, w}] += g.N
	}
	return out, nil
}
