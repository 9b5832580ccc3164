package models

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"time"
)

// MineItem is one of an author's own items with its verdict, score and owed jobs.
type MineItem struct {
	Kind       Kind
	ID         int64
	SongID     *int64
	Title      string
	CreatedAt  time.Time
	Verdict    *Verdict
	Confidence *float64
	Score      *Score
	Jobs       []Job
}

// ItemCount is how many items of one kind an author has, and the sum of their ids.
type ItemCount struct {
	N     int64
	IDSum int64
}

// MineVersion is what an author's own view (Mine, and their budget) is made of, read from keys
// and indexes alone, so that the view's ETag is known before the view is built:
//
//   - for each kind of item (revisions, comments, pitches, in that order) the count and the sum
//     of the ids (index-only on revisions_user and the like). Ids are never reused
//     (AUTOINCREMENT on SQLite, identity on PostgreSQL) and every new id is above every older
//     one, so the pair changes with any insert or delete, in any combination;
//   - the author's owed jobs (content_jobs_user_due), whole. A verdict or a score is only ever
//     recorded with its job's deletion (the screens_settle and scores_settle triggers), and an
//     allowed revision's verdict owes a new score job, so the jobs change with every verdict and
//     score; a reschedule changes a job's due_at, attempts and why, a retry its due_at;
//   - the spend on the budget day of now.
//
// Items are never updated in place, so nothing else of the view can change. What the version
// leaves to the caller is what the caller knows: the user, their effective daily limit, and the
// budget day (Day).
type MineVersion struct {
	Day   string       // the budget day of now
	Items [3]ItemCount // revisions, comments, pitches
	Spent int64        // spent on Day
	Jobs  []Job        // the author's owed jobs, by id
	// Due reports whether one of Jobs is due at now: due_at passed, no lease holds it and its
	// task is not held (the same test a claim makes), i.e. whether a sweep of the author would
	// find anything.
	Due bool
	// Held is what is held (Holds): the view shows a held job's why as held.
	Held Holds
	// Appeals is the author's appeals (count plus the sum of their decision times, in the
	// column of a job's due time in the statement's union): filing or deciding one changes it.
	Appeals int64
}

// mineVersionQuery reads a MineVersion in one statement, so from one snapshot: a first row
// (k = 0) of uncorrelated scalar subqueries (each evaluated once: counts and id sums from the
// (user_id, id) indexes alone, today's spend from its key), then one row (k = 1) per owed job of
// the author, by content_jobs_user_due. No ORDER BY: at a million items SQLite's sorter, even
// for ten rows, cost as much again as the rest of the statement (measured), so the caller tells
// the rows apart by k and sorts the jobs itself.
const mineVersionQuery = `SELECT 0 AS k,
		(SELECT COUNT(*) FROM revisions WHERE user_id = ?), (SELECT CAST(COALESCE(SUM(id), 0) AS BIGINT) FROM revisions WHERE user_id = ?),
		(SELECT COUNT(*) FROM comments WHERE user_id = ?), (SELECT CAST(COALESCE(SUM(id), 0) AS BIGINT) FROM comments WHERE user_id = ?),
		(SELECT COUNT(*) FROM pitches WHERE user_id = ?), (SELECT CAST(COALESCE(SUM(id), 0) AS BIGINT) FROM pitches WHERE user_id = ?),
		(SELECT spent FROM budgets WHERE user_id = ? AND day = ?),
		(SELECT screen + 2 * score FROM holds WHERE id = 1), NULL, NULL, NULL, NULL,
		(SELECT CAST(COUNT(*) + COALESCE(SUM(COALESCE(decided_at, 0)), 0) AS BIGINT) FROM reviews WHERE user_id = ? AND reason = 'appeal'),
		NULL, NULL, NULL, NULL, NULL, NULL
	UNION ALL
	SELECT 1, NULL, NULL, NULL, NULL, NULL, NULL, NULL, ` + jobColumns + ` FROM content_jobs WHERE user_id = ?`

// MineVersion reads the version of the author's own view at now (see MineVersion), on the
// read pool, without reading any item.
func (s *Store) MineVersion(ctx context.Context, userID int64, now time.Time) (MineVersion, error) {
	v := MineVersion{Day: BudgetDay(now)}
	u := userID
	rows, err := s.query(ctx, s.read, mineVersionQuery, u, u, u, u, u, u, u, v.Day, u, u)
	if err != nil {
		return v, fmt.Errorf("mine version of user %d: %w", userID, err)
	}
	defer rows.Close()
	r := newRow(8 + jobColumnCount)
	for rows.Next() {
		if err := r.scan(rows); err != nil {
			return v, fmt.Errorf("mine version of user %d: %w", userID, err)
		}
		if r.int64(0) == 0 {
			for k := range v.Items {
				v.Items[k] = ItemCount{N: r.int64(1 + 2*k), IDSum: r.int64(2 + 2*k)}
			}
			if r.vals[7] != nil {
				v.Spent = r.int64(7)
			}
			if r.vals[8] != nil {
				held := r.int64(8)
				v.Held.Screen, v.Held.Score = held&1 != 0, held&2 != 0
			}
			if r.vals[13] != nil {
				v.Appeals = r.int64(13)
			}
		} else {
			j := r.job(8)
			if j.DueBy(now) {
				v.Due = true
			}
			v.Jobs = append(v.Jobs, j)
		}
		if r.err != nil {
			return v, fmt.Errorf("mine version of user %d: %w", userID, r.err)
		}
	}
	if err := rows.Err(); err != nil {
		return v, fmt.Errorf("mine version of user %d: %w", userID, err)
	}
	slices.SortFunc(v.Jobs, func(a, b Job) int { return cmp.Compare(a.ID, b.ID) })
	if v.Due && (v.Held.Screen || v.Held.Score) {
		v.Due = false
		for _, j := range v.Jobs {
			if !v.Held.Task(j.Task) && j.DueBy(now) {
				v.Due = true
			}
		}
	}
	return v, nil
}

// Mine lists all of the author's own items, newest first across kinds, with their verdicts,
// scores and owed jobs.
func (s *Store) Mine(ctx context.Context, userID int64) ([]MineItem, error) {
	jobs, err := s.JobsOfUser(ctx, userID)
	if err != nil {
		return nil, fmt.Errorf("mine: %w", err)
	}
	return s.MineWithJobs(ctx, userID, jobs)
}

// MineWithJobs is Mine with the author's owed jobs already read (by MineVersion, whose Jobs
// it takes).
func (s *Store) MineWithJobs(ctx context.Context, userID int64, jobs []Job) ([]MineItem, error) {
	items, _, err := s.MinePage(ctx, userID, jobs, MineFilter{Limit: math.MaxInt32})
	if err != nil {
		return nil, fmt.Errorf("mine of user %d: %w", userID, err)
	}
	return items, nil
}

// MineFilter selects and pages an author's own items.
type MineFilter struct {
	State ItemState // "" (any)
	Kind  Kind      // "" (any)
	Limit int       // at most this many items (> 0)
	// After, when set, starts the page after this item (see MineCursor).
	After *MineCursor
}

// MineCursor is a place in an author's items, which are ordered newest first across kinds:
// by created_at descending, then kind (revision, comment, pitch), then id descending. That is
// a total order, so paging by it neither repeats nor skips an item whatever is written
// meanwhile (new items come before the first page).
type MineCursor struct {
	CreatedAt int64
	Kind      Kind
	ID        int64
}

// KindRank is the place of a kind in the view's order (-1 for an unknown kind).
func KindRank(kind Kind) int {
	for i, q := range mineQueries {
		if q.kind == kind {
			return i
		}
	}
	return -1
}

// mineQueries read an author's items, one kind each, in the view's order of kinds: the
// statement, its columns, and how a row of them becomes an item.
var mineQueries = [3]struct {
	kind       Kind
	alias, sql string
	columns    int
	read       func(r *row, it *MineItem)
}{
	{KindRevision, "r", `SELECT r.id, r.song_id, r.title, r.created_at, s.verdict, s.confidence,
		sc.art, sc.art_runs, sc.criteria, sc.model, sc.rubric
		FROM revisions r LEFT JOIN screens s ON s.kind = 'revision' AND s.item_id = r.id
		LEFT JOIN scores sc ON sc.revision_id = r.id
		WHERE r.user_id = ?`, 11, func(r *row, it *MineItem) {
		it.SongID, it.Title, it.CreatedAt = r.int64p(1), r.str(2), r.time(3)
		it.Verdict, it.Confidence = textp[Verdict](r, 4), r.floatp(5)
		if r.vals[6] != nil {
			sc := scoreRow{RevisionID: it.ID, Art: r.float(6), ArtRuns: r.strOr(7), Criteria: r.strOr(8),
				Model: r.strOr(9), Rubric: r.strOr(10)}.score()
			it.Score = &sc
		}
	}},
	{KindComment, "c", `SELECT c.id, c.song_id, c.created_at, s.verdict, s.confidence
		FROM comments c LEFT JOIN screens s ON s.kind = 'comment' AND s.item_id = c.id
		WHERE c.user_id = ?`, 5, func(r *row, it *MineItem) {
		it.SongID, it.CreatedAt, it.Verdict, it.Confidence = r.int64p(1), r.time(2), textp[Verdict](r, 3), r.floatp(4)
	}},
	{KindPitch, "p", `SELECT p.id, p.created_at, s.verdict, s.confidence
		FROM pitches p LEFT JOIN screens s ON s.kind = 'pitch' AND s.item_id = p.id
		WHERE p.user_id = ?`, 4, func(r *row, it *MineItem) {
		it.CreatedAt, it.Verdict, it.Confidence = r.time(1), textp[Verdict](r, 2), r.floatp(3)
	}},
}

// mineStateFilter is the condition on an item's verdict that selects its state.
var mineStateFilter = map[ItemState]string{
	"":           "",
	StatePending: ` AND s.verdict IS NULL`,
	StatePublic:  ` AND s.verdict = 'allow'`,
	StateBlocked: ` AND s.verdict = 'block'`,
}

// jobKey names the item a job is owed for.
type jobKey struct {
	kind Kind
	id   int64
}

// MinePage reads one page of the author's items that f selects, in the view's order (see
// MineCursor), each with its jobs out of jobs (the author's, as MineVersion read them). next
// is the cursor of the page's last item when more items follow, else nil. Each kind is read by
// its (user_id, created_at, id) index, at most Limit+1 rows, and the kinds are merged.
func (s *Store) MinePage(ctx context.Context, userID int64, jobs []Job, f MineFilter) (items []MineItem, next *MineCursor, err error) {
	if f.Limit <= 0 {
		return nil, nil, fmt.Errorf("mine page: limit %d", f.Limit)
	}
	stateSQL, ok := mineStateFilter[f.State]
	if !ok {
		return nil, nil, fmt.Errorf("mine page: unknown state %q", f.State)
	}
	afterRank := 0
	if f.After != nil {
		if afterRank = KindRank(f.After.Kind); afterRank < 0 {
			return nil, nil, fmt.Errorf("mine page: cursor of unknown kind %q", f.After.Kind)
		}
	}
	var byItem map[jobKey][]Job
	if len(jobs) > 0 {
		byItem = make(map[jobKey][]Job, len(jobs))
		for _, j := range jobs {
			k := jobKey{j.Kind, j.ItemID}
			byItem[k] = append(byItem[k], j)
		}
	}
	for rank := range mineQueries {
		if f.Kind != "" && f.Kind != mineQueries[rank].kind {
			continue
		}
		if items, err = s.mineKind(ctx, rank, userID, f, afterRank, stateSQL, byItem, items); err != nil {
			return nil, nil, fmt.Errorf("mine page: %s: %w", mineQueries[rank].kind, err)
		}
	}
	// Each kind is in order already; one stable sort merges them.
	slices.SortStableFunc(items, func(a, b MineItem) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		if c := cmp.Compare(KindRank(a.Kind), KindRank(b.Kind)); c != 0 {
			return c
		}
		return cmp.Compare(b.ID, a.ID)
	})
	if len(items) > f.Limit {
		items = items[:f.Limit]
		last := items[len(items)-1]
		next = &MineCursor{CreatedAt: last.CreatedAt.UnixMilli(), Kind: last.Kind, ID: last.ID}
	}
	return items, next, nil
}

// mineKind appends to items the page's candidates of one kind (mineQueries[rank]): at most
// f.Limit+1 of them, after the cursor, in the state stateSQL selects, each with its jobs.
func (s *Store) mineKind(ctx context.Context, rank int, userID int64, f MineFilter, afterRank int, stateSQL string,
	byItem map[jobKey][]Job, items []MineItem) ([]MineItem, error) {
	q := mineQueries[rank]
	sql, args := q.sql, []any{userID}
	if c := f.After; c != nil {
		// Items of a kind ranked before the cursor's come first among equal times, so they
		// must be strictly older; the cursor's own kind continues by id; later kinds may share
		// the cursor's time.
		a := q.alias
		switch {
		case rank < afterRank:
			sql += ` AND ` + a + `.created_at < ?`
			args = append(args, c.CreatedAt)
		case rank == afterRank:
			sql += ` AND (` + a + `.created_at < ? OR (` + a + `.created_at = ? AND ` + a + `.id < ?))`
			args = append(args, c.CreatedAt, c.CreatedAt, c.ID)
		default:
			sql += ` AND ` + a + `.created_at <= ?`
			args = append(args, c.CreatedAt)
		}
	}
	sql += stateSQL + ` ORDER BY ` + q.alias + `.created_at DESC, ` + q.alias + `.id DESC LIMIT ?`
	args = append(args, int64(f.Limit)+1)
	rows, err := s.query(ctx, s.read, sql, args...)
	if err != nil {
		return items, err
	}
	defer rows.Close()
	r := newRow(q.columns)
	for rows.Next() {
		if err := r.scan(rows); err != nil {
			return items, err
		}
		it := MineItem{Kind: q.kind, ID: r.int64(0)}
		q.read(r, &it)
		if r.err != nil {
			return items, r.err
		}
		it.Jobs = byItem[jobKey{q.kind, it.ID}]
		items = append(items, it)
	}
	return items, rows.Err()
}

// strOr is the text in column i, or "" for NULL.
func (r *row) strOr(i int) string {
	if r.vals[i] == nil {
		return ""
	}
	return r.str(i)
}
