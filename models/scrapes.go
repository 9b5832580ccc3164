package models

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrConflict is returned when a change does not fit the row's state (a scrape being deleted).
var ErrConflict = errors.New("conflict")

// deletingStates is the SQL list of the states a scrape takes once a delete is asked for.
const deletingStates = `('pending-delete', 'deleting', 'deleted')`

// Scrape is one archive run of a chat.
type Scrape struct {
	ID         int64       `gorm:"column:id"`
	ChatID     string      `gorm:"column:chat_id"`
	GuildID    *string     `gorm:"column:guild_id"`
	Backend    string      `gorm:"column:backend"`
	Mode       string      `gorm:"column:mode"`
	State      ScrapeState `gorm:"column:state"`
	Downloaded int64       `gorm:"column:downloaded"`
	// PushedAt is the bot's last push (or the walk's start): the walk lock lasts until idle.
	PushedAt  time.Time `gorm:"column:pushed_at;serializer:unixms"`
	CreatedAt time.Time `gorm:"column:created_at;serializer:unixms"`
	UpdatedAt time.Time `gorm:"column:updated_at;serializer:unixms"`

	Counts ScrapeCounts `gorm:"-"`
}

const scrapeColumns = `id, chat_id, guild_id, backend, mode, state, downloaded, pushed_at, created_at, updated_at`

// ScrapeCounts are a scrape's media rows by preview state, read from the maintained totals.
type ScrapeCounts struct {
	Pending    int64 `gorm:"column:pending"`
	Cached     int64 `gorm:"column:cached"`
	Failed     int64 `gorm:"column:failed"`
	Suspect    int64 `gorm:"column:suspect"`
	Unverified int64 `gorm:"column:unverified"`
	Skipped    int64 `gorm:"column:skipped"`
	Total      int64 `gorm:"column:total"`
	// StoredBytes is the size of the stored previews.
	StoredBytes int64 `gorm:"column:stored_bytes"`
	// PendingByKind counts pending rows per media kind.
	PendingByKind KindCounts `gorm:"-"`
}

// KindCounts are counts per media kind.
type KindCounts struct {
	Image int64 `json:"image"`
	GIF   int64 `json:"gif"`
	Video int64 `json:"video"`
	Audio int64 `json:"audio"`
}

// totalsColumns are scrape_totals' counts in the order scanTotals reads them.
const totalsColumns = `t.pending, t.cached, t.failed, t.suspect, t.unverified, t.skipped, t.total, t.stored_bytes,
	t.pending_image, t.pending_gif, t.pending_video, t.pending_audio`

// totalsDest lists where scanning totalsColumns goes.
func (c *ScrapeCounts) totalsDest() []any {
	k := &c.PendingByKind
	return []any{&c.Pending, &c.Cached, &c.Failed, &c.Suspect, &c.Unverified, &c.Skipped, &c.Total, &c.StoredBytes,
		&k.Image, &k.GIF, &k.Video, &k.Audio}
}

// withCounts fills the counts of the scrapes from their totals.
func (s *Store) withCounts(ctx context.Context, scrapes []Scrape) error {
	if len(scrapes) == 0 {
		return nil
	}
	ids := make([]int64, len(scrapes))
	at := make(map[int64]int, len(scrapes))
	for i := range scrapes {
		ids[i] = scrapes[i].ID
		at[scrapes[i].ID] = i
	}
	rows, err := s.query(ctx, s.read, `SELECT t.scrape_id, `+totalsColumns+` FROM scrape_totals t WHERE `+s.dialect.idIn("t.scrape_id"), idList(ids))
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var c ScrapeCounts
		if err := rows.Scan(append([]any{&id}, c.totalsDest()...)...); err != nil {
			return err
		}
		if i, ok := at[id]; ok {
			scrapes[i].Counts = c
		}
	}
	return rows.Err()
}

// NewScrape is what the bot says of a walk it starts.
type NewScrape struct {
	ChatID  string
	GuildID *string
	Backend string
	Mode    string
}

// CreateScrape records a new, active scrape. Its walk holds the walk lock from now on.
func (s *Store) CreateScrape(ctx context.Context, n NewScrape) (Scrape, error) {
	now := s.nowMs()
	sc := Scrape{ChatID: n.ChatID, GuildID: n.GuildID, Backend: n.Backend, Mode: n.Mode, State: ScrapeActive,
		PushedAt: fromMillis(now), CreatedAt: fromMillis(now), UpdatedAt: fromMillis(now)}
	if err := s.scan(ctx, s.db, &sc.ID, `INSERT INTO scrapes (chat_id, guild_id, backend, mode, state, downloaded, pushed_at, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, 0, ?, ?, ?) RETURNING id`,
		sc.ChatID, sc.GuildID, sc.Backend, sc.Mode, sc.State, now, now, now); err != nil {
		return Scrape{}, fmt.Errorf("create scrape: %w", err)
	}
	return sc, nil
}

// ScrapeByID finds a scrape (deleted ones too: the tombstone) with its counts.
func (s *Store) ScrapeByID(ctx context.Context, id int64) (Scrape, error) {
	sc, err := first[Scrape](ctx, s, s.db, "scrape", id, `SELECT `+scrapeColumns+` FROM scrapes WHERE id = ?`, id)
	if err != nil {
		return Scrape{}, err
	}
	rows := []Scrape{sc}
	return wrapped(rows[0], s.withCounts(ctx, rows), "scrape %d: counts", id)
}

// ScrapeFilter selects scrapes for a list.
type ScrapeFilter struct {
	ChatID string
	State  ScrapeState
}

// ListScrapes pages through scrapes by id after afterID, with their counts, never deleted ones.
func (s *Store) ListScrapes(ctx context.Context, f ScrapeFilter, afterID int64, limit int) ([]Scrape, error) {
	rows, err := fetch[[]Scrape](ctx, s, s.read, `SELECT `+scrapeColumns+` FROM scrapes WHERE state <> 'deleted' AND id > ?
		AND (? = '' OR chat_id = ?) AND (? = '' OR state = ?) ORDER BY id LIMIT ?`,
		afterID, f.ChatID, f.ChatID, f.State, f.State, limit)
	if err != nil {
		return nil, fmt.Errorf("list scrapes: %w", err)
	}
	if err := s.withCounts(ctx, rows); err != nil {
		return nil, fmt.Errorf("list scrapes: counts: %w", err)
	}
	return rows, nil
}

// UpdateScrape changes a scrape's state and/or downloaded count (active takes the walk lock again).
func (s *Store) UpdateScrape(ctx context.Context, id int64, state *ScrapeState, downloaded *int64) (Scrape, error) {
	err := s.WithTx(ctx, func(tx *Store) error {
		cur, err := first[Scrape](ctx, tx, tx.db, "scrape", id, `SELECT `+scrapeColumns+` FROM scrapes WHERE id = ?`+tx.dialect.forUpdate(), id)
		if err != nil {
			return err
		}
		if strings.Contains(deletingStates, "'"+string(cur.State)+"'") {
			return ErrConflict
		}
		// Becoming active pushes now; the CASE reads the state before the update.
		now, st := tx.nowMs(), (*string)(state)
		_, err = tx.exec(ctx, `UPDATE scrapes SET updated_at = ?, state = COALESCE(?, state), downloaded = COALESCE(?, downloaded),
			pushed_at = CASE WHEN ? = 'active' AND state <> 'active' THEN ? ELSE pushed_at END WHERE id = ?`,
			now, st, downloaded, st, now, id)
		return err
	})
	if err != nil {
		return Scrape{}, fmt.Errorf("update scrape %d: %w", id, err)
	}
	sc, err := s.ScrapeByID(ctx, id)
	return wrapped(sc, err, "update scrape")
}

// NewMedia is one media row the bot pushes.
type NewMedia struct {
	Kind  MediaKind
	URL   string
	Bytes *int64
}

// AddMedia adds pending media rows to a scrape and refreshes its last push, in one transaction.
// ErrNotFound when the scrape does not exist, ErrConflict when it is being deleted.
func (s *Store) AddMedia(ctx context.Context, scrapeID int64, items []NewMedia) (int, error) {
	err := s.WithTx(ctx, func(tx *Store) error {
		now := tx.nowMs()
		// The update locks the scrape row, so a delete asked for meanwhile waits for this push.
		changed, err := tx.exec(ctx, `UPDATE scrapes SET pushed_at = ?, updated_at = ? WHERE id = ? AND state NOT IN `+deletingStates,
			now, now, scrapeID)
		if err != nil {
			return err
		}
		if changed == 0 {
			n, err := fetch[int64](ctx, tx, tx.db, `SELECT COUNT(*) FROM scrapes WHERE id = ?`, scrapeID)
			if err != nil {
				return err
			}
			if n == 0 {
				return missing("scrape", scrapeID)
			}
			return ErrConflict
		}
		const chunk = 500
		for start := 0; start < len(items); start += chunk {
			part := items[start:min(start+chunk, len(items))]
			var b strings.Builder
			b.WriteString(`INSERT INTO media (scrape_id, kind, url, bytes, state, stored_bytes, updated_at) VALUES `)
			args := make([]any, 0, len(part)*5)
			for i, m := range part {
				if i > 0 {
					b.WriteString(", ")
				}
				b.WriteString("(?, ?, ?, ?, 'pending', 0, ?)")
				args = append(args, scrapeID, m.Kind, m.URL, m.Bytes, now)
			}
			if _, err := tx.exec(ctx, b.String(), args...); err != nil {
				return err
			}
		}
		return nil
	})
	return wrapped(len(items), err, "add media to scrape %d", scrapeID)
}

// RequestScrapeDelete marks a scrape pending-delete, for the background deleter (once only).
func (s *Store) RequestScrapeDelete(ctx context.Context, id int64) (Scrape, error) {
	now := s.nowMs()
	if _, err := s.exec(ctx, `UPDATE scrapes SET state = 'pending-delete', updated_at = ?
		WHERE id = ? AND state NOT IN `+deletingStates, now, id); err != nil {
		return Scrape{}, fmt.Errorf("request the delete of scrape %d: %w", id, err)
	}
	sc, err := s.ScrapeByID(ctx, id)
	return wrapped(sc, err, "request a scrape's delete")
}

// ScrapesToDelete lists the scrapes whose delete is asked for or under way, oldest first.
func (s *Store) ScrapesToDelete(ctx context.Context) ([]int64, error) {
	ids, err := fetch[[]int64](ctx, s, s.db, `SELECT id FROM scrapes WHERE state IN ('pending-delete', 'deleting') ORDER BY id`)
	return ids, wrap(err, "scrapes to delete")
}

// MarkScrapeDeleting moves a scrape from pending-delete to deleting.
func (s *Store) MarkScrapeDeleting(ctx context.Context, id int64) error {
	_, err := s.exec(ctx, `UPDATE scrapes SET state = 'deleting', updated_at = ? WHERE id = ? AND state = 'pending-delete'`,
		s.nowMs(), id)
	return wrap(err, "mark scrape %d deleting", id)
}

// MediaIDsOf lists up to limit ids of a scrape's media rows.
func (s *Store) MediaIDsOf(ctx context.Context, scrapeID int64, limit int) ([]int64, error) {
	ids, err := fetch[[]int64](ctx, s, s.db, `SELECT id FROM media WHERE scrape_id = ? ORDER BY id LIMIT ?`, scrapeID, limit)
	return ids, wrap(err, "media of scrape %d", scrapeID)
}

// DeleteMedia deletes media rows by id.
func (s *Store) DeleteMedia(ctx context.Context, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := s.exec(ctx, `DELETE FROM media WHERE `+s.dialect.idIn("id"), idList(ids))
	return wrap(err, "delete media")
}

// FinishScrapeDelete marks a deleting scrape deleted once it has no media rows left.
func (s *Store) FinishScrapeDelete(ctx context.Context, id int64) (bool, error) {
	n, err := s.exec(ctx, `UPDATE scrapes SET state = 'deleted', updated_at = ?
		WHERE id = ? AND state = 'deleting' AND NOT EXISTS (SELECT 1 FROM media WHERE scrape_id = ?)`, s.nowMs(), id, id)
	return wrapped(n > 0, err, "finish the delete of scrape %d", id)
}

// Media is one media row of a scrape.
type Media struct {
	ID       int64     `gorm:"column:id"`
	ScrapeID int64     `gorm:"column:scrape_id"`
	Kind     MediaKind `gorm:"column:kind"`
	URL      string    `gorm:"column:url"`
	// Bytes is the size the bot declared, if it did.
	Bytes *int64     `gorm:"column:bytes"`
	State MediaState `gorm:"column:state"`
	// StoredBytes is the size of the stored preview (0 unless cached).
	StoredBytes int64     `gorm:"column:stored_bytes"`
	UpdatedAt   time.Time `gorm:"column:updated_at;serializer:unixms"`
}

const mediaColumns = `id, scrape_id, kind, url, bytes, state, stored_bytes, updated_at`

// ListMedia pages through a scrape's media rows by id after afterID, in one state or all ("").
func (s *Store) ListMedia(ctx context.Context, scrapeID int64, state MediaState, afterID int64, limit int) ([]Media, error) {
	q := `SELECT ` + mediaColumns + ` FROM media WHERE scrape_id = ?`
	args := []any{scrapeID}
	if state != "" {
		q += ` AND state = ?`
		args = append(args, state)
	}
	q += ` AND id > ? ORDER BY id LIMIT ?`
	args = append(args, afterID, limit)
	rows, err := fetch[[]Media](ctx, s, s.read, q, args...)
	return rows, wrap(err, "list media of scrape %d", scrapeID)
}

// MediaByID finds one media row of a scrape that is not being deleted.
func (s *Store) MediaByID(ctx context.Context, id int64) (Media, error) {
	return first[Media](ctx, s, s.read, "media", id, `SELECT m.id, m.scrape_id, m.kind, m.url, m.bytes, m.state, m.stored_bytes, m.updated_at
		FROM media m JOIN scrapes s ON s.id = m.scrape_id WHERE m.id = ? AND s.state NOT IN `+deletingStates, id)
}

// MediaToPreview lists up to limit of a scrape's rows in state, oldest first.
func (s *Store) MediaToPreview(ctx context.Context, scrapeID int64, state MediaState, limit int) ([]Media, error) {
	rows, err := fetch[[]Media](ctx, s, s.db, `SELECT `+mediaColumns+` FROM media WHERE scrape_id = ? AND state = ? ORDER BY id LIMIT ?`,
		scrapeID, state, limit)
	return rows, wrap(err, "media to preview of scrape %d", scrapeID)
}

// RecordPreview keeps a row's preview outcome if the row still waits (pending or suspect) in a
// scrape not being deleted; recorded is false otherwise (a preview stored for it is an orphan).
func (s *Store) RecordPreview(ctx context.Context, id int64, state MediaState, storedBytes int64) (bool, error) {
	n, err := s.exec(ctx, `UPDATE media SET state = ?, stored_bytes = ?, updated_at = ?
		WHERE id = ? AND state IN ('pending', 'suspect')
		AND EXISTS (SELECT 1 FROM scrapes s WHERE s.id = media.scrape_id AND s.state NOT IN `+deletingStates+`)`,
		state, storedBytes, s.nowMs(), id)
	return wrapped(n > 0, err, "record the preview of media %d", id)
}

// RecordBackfillPreview is RecordPreview that adds a settled row to chatID's job's processed too.
func (s *Store) RecordBackfillPreview(ctx context.Context, chatID string, id int64, state MediaState, storedBytes int64) (bool, error) {
	var ok bool
	err := s.WithTx(ctx, func(tx *Store) error {
		var err error
		if ok, err = tx.RecordPreview(ctx, id, state, storedBytes); err != nil || !ok || !state.Settled() {
			return err
		}
		_, err = tx.exec(ctx, `UPDATE backfill_jobs SET processed = processed + 1 WHERE chat_id = ?`, chatID)
		return err
	})
	return wrapped(ok, err, "record the backfill preview of media %d", id)
}

// WalkUntil is when the walk lock lapses (the newest active push plus idle); ok false: none active.
func (s *Store) WalkUntil(ctx context.Context, idle time.Duration) (time.Time, bool, error) {
	newest, err := fetch[*int64](ctx, s, s.db, `SELECT MAX(pushed_at) FROM scrapes WHERE state = 'active'`)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("walk until: %w", err)
	}
	if newest == nil {
		return time.Time{}, false, nil
	}
	return time.UnixMilli(*newest).Add(idle), true, nil
}

// WalkingChat is the chat of the active scrape that pushed last ("" when none is active).
func (s *Store) WalkingChat(ctx context.Context) (string, error) {
	chat, err := fetch[string](ctx, s, s.read, `SELECT chat_id FROM scrapes WHERE state = 'active' ORDER BY pushed_at DESC, id DESC LIMIT 1`)
	return chat, wrap(err, "walking chat")
}
