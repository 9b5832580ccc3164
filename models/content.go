package models

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// itemTable names the table of an item kind; kinds are checked before they reach SQL.
func itemTable(kind Kind) (string, error) {
	switch kind {
	case KindRevision:
		return "revisions", nil
	case KindComment:
		return "comments", nil
	case KindPitch:
		return "pitches", nil
	}
	return "", fmt.Errorf("unknown item kind %q", kind)
}

// Song is a listener's song; it is public once one of its revisions is allowed.
type Song struct {
	ID        int64     `gorm:"column:id" json:"id"`
	UserID    int64     `gorm:"column:user_id" json:"userId"`
	Title     string    `gorm:"column:title" json:"title"`
	Public    int       `gorm:"column:public" json:"-"`
	Art       *float64  `gorm:"column:art" json:"art"`
	CreatedAt time.Time `gorm:"column:created_at;serializer:unixms" json:"-"`
	// ScoreRubric is the rubric its art was scored under (nil while unscored).
	ScoreRubric *string `gorm:"column:score_rubric" json:"scoreRubric"`
}

// Revision is one version of a song's code.
type Revision struct {
	ID        int64     `gorm:"column:id"`
	SongID    int64     `gorm:"column:song_id"`
	UserID    int64     `gorm:"column:user_id"`
	Title     string    `gorm:"column:title"`
	Code      string    `gorm:"column:code"`
	CreatedAt time.Time `gorm:"column:created_at;serializer:unixms"`
}

// Comment is a listener's comment on a song.
type Comment struct {
	ID        int64     `gorm:"column:id"`
	SongID    int64     `gorm:"column:song_id"`
	UserID    int64     `gorm:"column:user_id"`
	Body      string    `gorm:"column:body"`
	CreatedAt time.Time `gorm:"column:created_at;serializer:unixms"`
}

// Pitch is a listener's pitch.
type Pitch struct {
	ID        int64     `gorm:"column:id"`
	UserID    int64     `gorm:"column:user_id"`
	Body      string    `gorm:"column:body"`
	CreatedAt time.Time `gorm:"column:created_at;serializer:unixms"`
}

// Subject is what the screen of an item reads.
type Subject struct {
	UserID int64
	Title  string
	Text   string
}

// ScoreSubject is what the critic reads of a revision.
type ScoreSubject struct {
	RevisionID int64
	SongID     int64
	UserID     int64
	Title      string
	Code       string
	Rubric     *string // the rubric of the revision's score, when it has one (a re-score's)
}

// Score is the critic's mean verdict on a revision.
type Score struct {
	RevisionID int64              `json:"-"`
	Art        float64            `json:"art"`
	ArtRuns    []float64          `json:"artRuns"`
	Criteria   map[string]float64 `json:"criteria"`
	Model      string             `json:"model"`
	Rubric     string             `json:"rubric"`
	ScoredAt   time.Time          `json:"-"`
}

// CreateSong writes a song and its first revision; the revision's trigger owes its screening.
func (s *Store) CreateSong(ctx context.Context, userID int64, title, code string) (Song, Revision, error) {
	var song Song
	var rev Revision
	err := s.WithTx(ctx, func(tx *Store) error {
		now := tx.nowMs()
		song = Song{UserID: userID, Title: title, CreatedAt: fromMillis(now)}
		if err := tx.scan(ctx, tx.db, &song.ID, `INSERT INTO songs (user_id, title, created_at) VALUES (?, ?, ?) RETURNING id`,
			userID, title, now); err != nil {
			return err
		}
		var err error
		rev, err = tx.insertRevision(ctx, song.ID, userID, title, code)
		tx.changed(userID)
		tx.made(song)
		tx.made(rev)
		return err
	})
	return wrapped2(song, rev, err, "create song")
}

func (s *Store) insertRevision(ctx context.Context, songID, userID int64, title, code string) (Revision, error) {
	rev := Revision{SongID: songID, UserID: userID, Title: title, Code: code, CreatedAt: fromMillis(s.nowMs())}
	if err := s.scan(ctx, s.db, &rev.ID, `INSERT INTO revisions (song_id, user_id, title, code, created_at) VALUES (?, ?, ?, ?, ?) RETURNING id`,
		songID, userID, title, code, rev.CreatedAt.UnixMilli()); err != nil {
		return Revision{}, fmt.Errorf("insert revision: %w", err)
	}
	return rev, nil
}

// SongByID finds a song whoever owns it.
func (s *Store) SongByID(ctx context.Context, id int64) (Song, error) {
	return first[Song](ctx, s, s.read, "song", id, `SELECT * FROM songs WHERE id = ?`, id)
}

// CreateRevision adds a revision to the author's own song (empty title: the song's).
func (s *Store) CreateRevision(ctx context.Context, userID, songID int64, title, code string) (Revision, error) {
	var rev Revision
	err := s.WithTx(ctx, func(tx *Store) error {
		song, err := tx.SongByID(ctx, songID)
		if err != nil {
			return err
		}
		if song.UserID != userID {
			// Another author's song answers as a missing one would: no existence oracle.
			return missing("song", songID)
		}
		if title == "" {
			title = song.Title
		} else if title != song.Title {
			if _, err := tx.exec(ctx, `UPDATE songs SET title = ? WHERE id = ?`, title, songID); err != nil {
				return err
			}
		}
		rev, err = tx.insertRevision(ctx, songID, userID, title, code)
		tx.changed(userID)
		tx.made(rev)
		return err
	})
	return wrapped(rev, err, "create a revision of song %d", songID)
}

// CreateComment comments on a song the author can see: public, or their own.
func (s *Store) CreateComment(ctx context.Context, userID, songID int64, body string) (Comment, error) {
	var c Comment
	err := s.WithTx(ctx, func(tx *Store) error {
		song, err := tx.SongByID(ctx, songID)
		if err != nil {
			return err
		}
		if song.Public == 0 && song.UserID != userID {
			return missing("song", songID)
		}
		c = Comment{SongID: songID, UserID: userID, Body: body, CreatedAt: fromMillis(tx.nowMs())}
		tx.changed(userID)
		if err := tx.scan(ctx, tx.db, &c.ID, `INSERT INTO comments (song_id, user_id, body, created_at) VALUES (?, ?, ?, ?) RETURNING id`,
			songID, userID, body, c.CreatedAt.UnixMilli()); err != nil {
			return err
		}
		tx.made(c)
		return nil
	})
	return wrapped(c, err, "create a comment on song %d", songID)
}

// CreatePitch writes a pitch, in a transaction so a request's hook commits with it.
func (s *Store) CreatePitch(ctx context.Context, userID int64, body string) (Pitch, error) {
	var p Pitch
	err := s.WithTx(ctx, func(tx *Store) error {
		p = Pitch{UserID: userID, Body: body, CreatedAt: fromMillis(tx.nowMs())}
		if err := tx.scan(ctx, tx.db, &p.ID, `INSERT INTO pitches (user_id, body, created_at) VALUES (?, ?, ?) RETURNING id`,
			userID, body, p.CreatedAt.UnixMilli()); err != nil {
			return err
		}
		tx.changed(userID)
		tx.made(p)
		return nil
	})
	return wrapped(p, err, "create pitch")
}

// DeleteItem deletes the author's own song (and its items), revision, comment or pitch; else ErrNotFound.
func (s *Store) DeleteItem(ctx context.Context, userID int64, kind Kind, id int64) error {
	table := "songs"
	if kind != "song" {
		var err error
		if table, err = itemTable(kind); err != nil {
			return fmt.Errorf("delete item: %w", err)
		}
	}
	err := s.WithTx(ctx, func(tx *Store) error {
		owner, err := fetch[int64](ctx, tx, tx.db, `SELECT user_id FROM `+table+` WHERE id = ?`, id)
		if err != nil {
			return err
		}
		if owner != userID { // 0: no such item
			return missing(string(kind), id) // another author's too: they learn nothing of the item
		}
		var songID int64
		switch kind {
		case KindRevision:
			if err := tx.scan(ctx, tx.db, &songID, `SELECT song_id FROM revisions WHERE id = ?`, id); err != nil {
				return err
			}
		case "song":
			songID = id
		}
		tx.changed(userID)
		if songID != 0 {
			// The song may go, and its comments with it: their authors' views change too.
			commenters, err := fetch[[]int64](ctx, tx, tx.db, `SELECT DISTINCT user_id FROM comments WHERE song_id = ?`, songID)
			if err != nil {
				return err
			}
			tx.changed(commenters...)
		}
		if _, err := tx.exec(ctx, `DELETE FROM `+table+` WHERE id = ?`, id); err != nil {
			return err
		}
		if kind == KindRevision {
			// A song without revisions has nothing left to show: it goes too.
			_, err := tx.exec(ctx, `DELETE FROM songs WHERE id = ? AND NOT EXISTS (SELECT 1 FROM revisions WHERE song_id = ?)`,
				songID, songID)
			return err
		}
		return nil
	})
	return wrap(err, "delete %s %d", kind, id)
}

// ScreenSubject reads what the screen of an item sends; ok is false when it is gone. Batched on PostgreSQL.
func (s *Store) ScreenSubject(ctx context.Context, kind Kind, id int64) (Subject, bool, error) {
	if _, err := itemTable(kind); err != nil {
		return Subject{}, false, fmt.Errorf("screen subject: %w", err)
	}
	if s.subjects != nil {
		out, err := s.subjects.do(ctx, itemKey{kind, id})
		return wrapped2(out.subject, out.ok, err, "screen subject %s %d", kind, id)
	}
	rows, err := s.query(ctx, s.read, `SELECT `+subjectOf[kind]+` WHERE id = ?`, id)
	if err != nil {
		return Subject{}, false, fmt.Errorf("screen subject %s %d: %w", kind, id, err)
	}
	defer rows.Close()
	var sub Subject
	ok := rows.Next()
	if ok {
		err = rows.Scan(&sub.UserID, &sub.Title, &sub.Text)
	} else {
		err = rows.Err()
	}
	return wrapped2(sub, ok, err, "screen subject %s %d", kind, id)
}

// subjectOf is, per kind, what its screen sends (author, title, text) from its table.
var subjectOf = map[Kind]string{
	KindRevision: `user_id, title, code FROM revisions`,
	KindComment:  `user_id, '', body FROM comments`,
	KindPitch:    `user_id, '', body FROM pitches`,
}

type subjectOutcome struct {
	subject Subject
	ok      bool
}

// screenSubjects reads the items of keys in one query (PostgreSQL).
func (s *Store) screenSubjects(ctx context.Context, keys []itemKey) ([]subjectOutcome, error) {
	ids := map[Kind][]int64{KindRevision: {}, KindComment: {}, KindPitch: {}}
	for _, k := range keys {
		ids[k.kind] = append(ids[k.kind], k.id)
	}
	var args []any
	var parts []string
	for _, kind := range Kinds {
		args = append(args, idList(ids[kind]))
		parts = append(parts, `SELECT '`+string(kind)+`', id, `+subjectOf[kind]+` WHERE `+s.dialect.idIn("id"))
	}
	rows, err := s.query(ctx, s.read, strings.Join(parts, " UNION ALL "), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	found := make(map[itemKey]Subject, len(keys))
	for rows.Next() {
		var k itemKey
		var sub Subject
		if err := rows.Scan(&k.kind, &k.id, &sub.UserID, &sub.Title, &sub.Text); err != nil {
			return nil, err
		}
		found[k] = sub
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	outs := make([]subjectOutcome, len(keys))
	for i, k := range keys {
		sub, ok := found[k]
		outs[i] = subjectOutcome{sub, ok}
	}
	return outs, nil
}

// ScoreSubject reads the revision the critic scores; ok is false when it is gone.
func (s *Store) ScoreSubject(ctx context.Context, revisionID int64) (ScoreSubject, bool, error) {
	sub, ok, err := maybe[ScoreSubject](ctx, s, s.read, `SELECT id AS revision_id, song_id, user_id, title, code,
		(SELECT rubric FROM scores WHERE revision_id = revisions.id) AS rubric FROM revisions WHERE id = ?`,
		revisionID)
	return sub, ok, wrap(err, "score subject %d", revisionID)
}

// scoreRow is a score as stored.
type scoreRow struct {
	RevisionID int64     `gorm:"column:revision_id"`
	Art        float64   `gorm:"column:art"`
	ArtRuns    string    `gorm:"column:art_runs"`
	Criteria   string    `gorm:"column:criteria"`
	Model      string    `gorm:"column:model"`
	Rubric     string    `gorm:"column:rubric"`
	ScoredAt   time.Time `gorm:"column:scored_at;serializer:unixms"`
}

// score is the row's score, its JSON runs and criteria read as json.Unmarshal leaves them.
func (r scoreRow) score() Score {
	sc := Score{RevisionID: r.RevisionID, Art: r.Art, Model: r.Model, Rubric: r.Rubric, ScoredAt: r.ScoredAt}
	json.Unmarshal([]byte(r.ArtRuns), &sc.ArtRuns)
	json.Unmarshal([]byte(r.Criteria), &sc.Criteria)
	if sc.ArtRuns == nil {
		sc.ArtRuns = []float64{}
	}
	if sc.Criteria == nil {
		sc.Criteria = map[string]float64{}
	}
	return sc
}
