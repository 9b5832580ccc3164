package models

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
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
		if err := tx.db.Raw(`INSERT INTO songs (user_id, title, created_at) VALUES (?, ?, ?) RETURNING id`,
			userID, title, now).Scan(&song.ID).Error; err != nil {
			return err
		}
		var err error
		rev, err = tx.insertRevision(song.ID, userID, title, code)
		tx.changed(userID)
		return err
	})
	return song, rev, err
}

func (s *Store) insertRevision(songID, userID int64, title, code string) (Revision, error) {
	rev := Revision{SongID: songID, UserID: userID, Title: title, Code: code, CreatedAt: fromMillis(s.nowMs())}
	err := s.db.Raw(`INSERT INTO revisions (song_id, user_id, title, code, created_at) VALUES (?, ?, ?, ?, ?) RETURNING id`,
		songID, userID, title, code, rev.CreatedAt.UnixMilli()).Scan(&rev.ID).Error
	return rev, err
}

// SongByID finds a song whoever owns it.
func (s *Store) SongByID(ctx context.Context, id int64) (Song, error) {
	var song Song
	err := s.read.WithContext(ctx).Raw(`SELECT * FROM songs WHERE id = ?`, id).Scan(&song).Error
	if err == nil && song.ID == 0 {
		err = ErrNotFound
	}
	return song, err
}

// CreateRevision adds a revision to the author's own song. An empty title keeps the song's.
// ErrNotFound when the song is missing or another author's.
func (s *Store) CreateRevision(ctx context.Context, userID, songID int64, title, code string) (Revision, error) {
	var rev Revision
	err := s.WithTx(ctx, func(tx *Store) error {
		song, err := tx.SongByID(ctx, songID)
		if err != nil {
			return err
		}
		if song.UserID != userID {
			// Another author's song answers as a missing one would: no existence oracle.
			return ErrNotFound
		}
		if title == "" {
			title = song.Title
		} else if title != song.Title {
			if err := tx.db.Exec(`UPDATE songs SET title = ? WHERE id = ?`, title, songID).Error; err != nil {
				return err
			}
		}
		rev, err = tx.insertRevision(songID, userID, title, code)
		tx.changed(userID)
		return err
	})
	return rev, err
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
			return ErrNotFound
		}
		c = Comment{SongID: songID, UserID: userID, Body: body, CreatedAt: fromMillis(tx.nowMs())}
		tx.changed(userID)
		return tx.db.Raw(`INSERT INTO comments (song_id, user_id, body, created_at) VALUES (?, ?, ?, ?) RETURNING id`,
			songID, userID, body, c.CreatedAt.UnixMilli()).Scan(&c.ID).Error
	})
	return c, err
}

// CreatePitch writes a pitch.
func (s *Store) CreatePitch(ctx context.Context, userID int64, body string) (Pitch, error) {
	p := Pitch{UserID: userID, Body: body, CreatedAt: fromMillis(s.nowMs())}
	err := s.db.WithContext(ctx).Raw(`INSERT INTO pitches (user_id, body, created_at) VALUES (?, ?, ?) RETURNING id`,
		userID, body, p.CreatedAt.UnixMilli()).Scan(&p.ID).Error
	if err == nil {
		s.changed(userID)
	}
	return p, err
}

// DeleteItem deletes the author's own song, revision, comment or pitch ("song" deletes the
// song with its revisions and comments). The triggers take the owed jobs with it. ErrNotFound
// when the item is missing or another author's, alike.
func (s *Store) DeleteItem(ctx context.Context, userID int64, kind Kind, id int64) error {
	table := "songs"
	if kind != "song" {
		var err error
		if table, err = itemTable(kind); err != nil {
			return err
		}
	}
	return s.WithTx(ctx, func(tx *Store) error {
		var owner []int64
		if err := tx.db.Raw(`SELECT user_id FROM `+table+` WHERE id = ?`, id).Scan(&owner).Error; err != nil {
			return err
		}
		if len(owner) == 0 {
			return ErrNotFound
		}
		if owner[0] != userID {
			return ErrNotFound // as if missing: another author learns nothing of the item
		}
		var songID int64
		switch kind {
		case KindRevision:
			if err := tx.db.Raw(`SELECT song_id FROM revisions WHERE id = ?`, id).Scan(&songID).Error; err != nil {
				return err
			}
		case "song":
			songID = id
		}
		tx.changed(userID)
		if songID != 0 {
			// The song may go, and its comments with it: their authors' views change too.
			var commenters []int64
			if err := tx.db.Raw(`SELECT DISTINCT user_id FROM comments WHERE song_id = ?`, songID).Scan(&commenters).Error; err != nil {
				return err
			}
			tx.changed(commenters...)
		}
		if err := tx.db.Exec(`DELETE FROM `+table+` WHERE id = ?`, id).Error; err != nil {
			return err
		}
		if kind == KindRevision {
			// A song without revisions has nothing left to show: it goes too.
			return tx.db.Exec(`DELETE FROM songs WHERE id = ? AND NOT EXISTS (SELECT 1 FROM revisions WHERE song_id = ?)`,
				songID, songID).Error
		}
		return nil
	})
}

// ScreenSubject reads what the screen of an item sends; ok is false when the item is gone.
// On PostgreSQL, where every query is a round trip, concurrent reads share one (see batcher).
func (s *Store) ScreenSubject(ctx context.Context, kind Kind, id int64) (Subject, bool, error) {
	if _, err := itemTable(kind); err != nil {
		return Subject{}, false, err
	}
	if s.subjects != nil {
		out, err := s.subjects.do(ctx, itemKey{kind, id})
		return out.subject, out.ok, err
	}
	var sub Subject
	err := s.read.WithContext(ctx).Raw(`SELECT `+subjectOf[kind]+` WHERE id = ?`, id).Row().Scan(&sub.UserID, &sub.Title, &sub.Text)
	if errors.Is(err, sql.ErrNoRows) {
		return Subject{}, false, nil
	}
	return sub, err == nil, err
}

// subjectOf is, per kind of item, what its screen sends (author, title, text) and the table it
// is read from.
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
		param, err := jsonParam(ids[kind])
		if err != nil {
			return nil, err
		}
		args = append(args, param)
		parts = append(parts, `SELECT '`+string(kind)+`', id, `+subjectOf[kind]+` WHERE `+s.idIn("id"))
	}
	rows, err := s.read.WithContext(ctx).Raw(strings.Join(parts, " UNION ALL "), args...).Rows()
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
	var rows []ScoreSubject
	err := s.read.WithContext(ctx).Raw(
		`SELECT id AS revision_id, song_id, user_id, title, code FROM revisions WHERE id = ?`, revisionID).Scan(&rows).Error
	if err != nil || len(rows) == 0 {
		return ScoreSubject{}, false, err
	}
	return rows[0], true, nil
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
