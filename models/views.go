package models

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// SongCursor is where a page of public songs continues.
type SongCursor struct {
	Art *float64 `json:"a,omitempty"`
	ID  int64    `json:"i"`
}

// publicSongColumns read a song with its newest allowed revision's title (public_title).
const publicSongColumns = `id, user_id, public, art, created_at, COALESCE(public_title, title) AS title, score_rubric`

// PublicSongs lists public songs by art (best first, unscored last) or newest first, after the cursor.
func (s *Store) PublicSongs(ctx context.Context, byArt bool, after *SongCursor, limit int) ([]Song, error) {
	q := `SELECT ` + publicSongColumns + ` FROM songs WHERE public = 1`
	var args []any
	if byArt {
		if after != nil {
			if after.Art != nil {
				q += ` AND (art < ? OR (art = ? AND id < ?) OR art IS NULL)`
				args = append(args, *after.Art, *after.Art, after.ID)
			} else {
				q += ` AND art IS NULL AND id < ?`
				args = append(args, after.ID)
			}
		}
		q += ` ORDER BY ` + s.dialect.artDesc()
	} else {
		if after != nil {
			q += ` AND id < ?`
			args = append(args, after.ID)
		}
		q += ` ORDER BY id DESC`
	}
	q += ` LIMIT ` + strconv.Itoa(limit) // a literal, as GORM's Limit wrote it: PostgreSQL plans for it
	rows, err := s.query(ctx, s.read, q, args...)
	if err != nil {
		return nil, fmt.Errorf("public songs: %w", err)
	}
	songs, err := scanRows(rows, 7, min(limit, 256), func(r *row) Song {
		return Song{ID: r.int64(0), UserID: r.int64(1), Public: int(r.int64(2)), Art: r.floatp(3),
			CreatedAt: r.time(4), Title: r.str(5), ScoreRubric: r.strp(6)}
	})
	return wrapped(songs, err, "public songs")
}

// PublicRevision is an allowed revision of a public song.
type PublicRevision struct {
	ID        int64     `gorm:"column:id"`
	Title     string    `gorm:"column:title"`
	Code      string    `gorm:"column:code"`
	CreatedAt time.Time `gorm:"column:created_at;serializer:unixms"`
	Score     *Score    `gorm:"-"`
}

// PublicComment is an allowed comment.
type PublicComment struct {
	ID        int64     `gorm:"column:id"`
	UserID    int64     `gorm:"column:user_id"`
	Body      string    `gorm:"column:body"`
	CreatedAt time.Time `gorm:"column:created_at;serializer:unixms"`
}

// PublicSong reads a public song with its allowed revisions (newest first) and allowed comments.
func (s *Store) PublicSong(ctx context.Context, id int64) (Song, []PublicRevision, []PublicComment, error) {
	song, err := s.SongByID(ctx, id)
	if err != nil {
		return Song{}, nil, nil, fmt.Errorf("public song %d: %w", id, err)
	}
	if song.Public == 0 {
		return Song{}, nil, nil, missing("song", id)
	}
	revs, err := fetch[[]PublicRevision](ctx, s, s.read, `SELECT r.id, r.title, r.code, r.created_at FROM revisions r
		JOIN screens s ON s.kind = 'revision' AND s.item_id = r.id AND s.verdict = 'allow'
		WHERE r.song_id = ? ORDER BY r.id DESC LIMIT 50`, id)
	if err != nil {
		return Song{}, nil, nil, fmt.Errorf("public song %d: %w", id, err)
	}
	if len(revs) > 0 {
		song.Title = revs[0].Title // the newest allowed revision's, as PublicSongs shows it
	}
	scores, err := fetch[[]scoreRow](ctx, s, s.read, `SELECT * FROM scores WHERE song_id = ?`, id)
	if err != nil {
		return Song{}, nil, nil, fmt.Errorf("public song %d: %w", id, err)
	}
	for _, sr := range scores {
		for i := range revs {
			if revs[i].ID == sr.RevisionID {
				sc := sr.score()
				revs[i].Score = &sc
			}
		}
	}
	comments, err := fetch[[]PublicComment](ctx, s, s.read, `SELECT c.id, c.user_id, c.body, c.created_at FROM comments c
		JOIN screens s ON s.kind = 'comment' AND s.item_id = c.id AND s.verdict = 'allow'
		WHERE c.song_id = ? ORDER BY c.id DESC LIMIT 200`, id)
	if err != nil {
		return Song{}, nil, nil, fmt.Errorf("public song %d: %w", id, err)
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
	if err := s.scan(ctx, s.read, &out, q, args...); err != nil {
		return nil, fmt.Errorf("public pitches: %w", err)
	}
	return out, nil
}

// JobStats summarises the owed work for the admin overview.
type JobStats struct {
	Total       int64
	Due         int64 // due now and not held (held work is claimed by no one: it is not due)
	Held        int64 // of a held task and not leased
	Leased      int64
	ByWhy       map[Why]int64 // "none" for jobs that are simply due or new; "held" for a held task's
	HeldByWhy   map[Why]int64 // the held ones by their own why, as they would show unheld ("none" for none)
	ByTask      map[Task]int64
	OldestDueAt *time.Time
}

// Stats counts owed jobs.
func (s *Store) Stats(ctx context.Context) (JobStats, error) {
	now := s.nowMs()
	st := JobStats{ByWhy: map[Why]int64{"none": 0}, HeldByWhy: map[Why]int64{}, ByTask: map[Task]int64{TaskScreen: 0, TaskScore: 0}}
	for _, w := range Whys {
		st.ByWhy[w] = 0
	}
	pairs, err := s.JobsByTaskWhy(ctx)
	if err != nil {
		return st, fmt.Errorf("job stats: %w", err)
	}
	holds, err := s.Holds(ctx)
	if err != nil {
		return st, fmt.Errorf("job stats: %w", err)
	}
	for k, n := range pairs {
		st.Total += n
		st.ByTask[Task(k[0])] += n
		// By the why ShownWhy shows, leases aside; the breaker's share is the caller's.
		j, shown := Job{Task: Task(k[0])}, Why(k[1])
		if shown != "none" {
			j.Why = &shown
		}
		if w := ShownWhy(holds, nil, &j, time.Time{}); w != nil {
			shown = *w
		}
		if shown == WhyHeld {
			st.HeldByWhy[Why(k[1])] += n
		}
		st.ByWhy[shown] += n
	}
	var agg struct {
		Due    int64  `gorm:"column:due"`
		Held   int64  `gorm:"column:held"`
		Leased int64  `gorm:"column:leased"`
		Oldest *int64 `gorm:"column:oldest"`
	}
	err = s.scan(ctx, s.read, &agg, `SELECT
		(SELECT COUNT(*) FROM content_jobs WHERE due_at <= ? AND (lease_until IS NULL OR lease_until <= ?)`+heldTasks+`) AS due,
		(SELECT COUNT(*) FROM content_jobs WHERE (lease_until IS NULL OR lease_until <= ?) AND `+heldTask+`) AS held,
		(SELECT COUNT(*) FROM content_jobs WHERE lease_until > ?) AS leased,
		(SELECT MIN(due_at) FROM content_jobs WHERE due_at <= ? AND (lease_until IS NULL OR lease_until <= ?)`+heldTasks+`) AS oldest`,
		now, now, now, now, now, now)
	if err != nil {
		return st, fmt.Errorf("job stats: %w", err)
	}
	st.Due, st.Held, st.Leased = agg.Due, agg.Held, agg.Leased
	if agg.Oldest != nil {
		oldest := fromMillis(*agg.Oldest)
		st.OldestDueAt = &oldest
	}
	return st, nil
}

// Settled is one minute's attempts by outcome.
type Settled struct {
	Minute time.Time // the minute's start
	Screen int64     // verdicts recorded
	Score  int64     // scores recorded
	Put    int64     // attempts that left the job pending
}

// SettledPerMinute counts the attempts of each of the last n minutes, oldest first.
func (s *Store) SettledPerMinute(ctx context.Context, n int) ([]Settled, error) {
	now := s.Now()
	end := now.Truncate(time.Minute).UnixMilli() + 60000
	start := end - int64(n)*60000
	var rows []struct {
		M       int64        `gorm:"column:m"`
		Event   Task         `gorm:"column:event"`
		Outcome EventOutcome `gorm:"column:outcome"`
		N       int64        `gorm:"column:n"`
	}
	if err := s.scan(ctx, s.read, &rows, `SELECT at / 60000 AS m, event, outcome, COUNT(*) AS n FROM events
		WHERE at >= ? GROUP BY at / 60000, event, outcome`, start); err != nil {
		return nil, fmt.Errorf("settled per minute: %w", err)
	}
	out := make([]Settled, n)
	for i := range out {
		out[i].Minute = fromMillis(start + int64(i)*60000)
	}
	for _, r := range rows {
		i := int((r.M*60000 - start) / 60000)
		if i < 0 || i >= n {
			continue
		}
		switch {
		case r.Outcome == OutcomePending:
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
	Verdict    *Verdict
	Confidence *float64
	Job        *Job
}

// ScreenOf reads an item's verdict and screen job.
func (s *Store) ScreenOf(ctx context.Context, kind Kind, id int64) (ItemScreen, error) {
	var out ItemScreen
	v, ok, err := maybe[struct {
		Verdict    Verdict `gorm:"column:verdict"`
		Confidence float64 `gorm:"column:confidence"`
	}](ctx, s, s.db, `SELECT verdict, confidence FROM screens WHERE kind = ? AND item_id = ?`, kind, id)
	if err != nil || ok {
		out.Verdict, out.Confidence = &v.Verdict, &v.Confidence
		return wrapped(out, err, "screen of %s %d", kind, id)
	}
	job, ok, err := maybe[Job](ctx, s, s.db, `SELECT `+jobColumns+` FROM content_jobs WHERE task = 'screen' AND kind = ? AND item_id = ?`, kind, id)
	if ok {
		out.Job = &job
	}
	return out, wrap(err, "screen of %s %d", kind, id)
}
