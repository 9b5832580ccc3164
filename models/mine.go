package models

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
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
	// Jobs are the item's owed jobs, with what the view shows (see mineJobColumns): no status,
	// lease or creation time.
	Jobs []Job
}

// MineVersion is what an author's own view (MinePage, and their budget) is made of, read from
// facts the database keeps (mine_versions, kept by the triggers on every table the view shows),
// so that the view's ETag is known before the view is built:
//
//   - Version, the author's change counter: bumped in the transaction of every change of what
//     the view shows (items, owed jobs, verdicts, scores, budget charges, the daily limit), by
//     the store or by raw SQL; it only grows;
//   - Shared, the counter of what every view shares (mine_versions row 0: the holds);
//   - the spend on the budget day of now, and the author's appeals.
//
// The same row keeps the author's number of owed jobs and a bound on their earliest due time.
type MineVersion struct {
	Day     string // the budget day of now
	Version int64  // the author's change counter (0: never changed)
	Shared  int64  // the counter of what every view shares (the holds)
	Spent   int64  // spent on Day
	Jobs    int64  // the author's owed jobs
	// NextDueAt is no later than the earliest due time of the author's jobs (nil: none): lowered
	// as jobs come or are put off, raised by the runner after a sweep of the author
	// (RaiseNextDue).
	NextDueAt *time.Time
	// Held is what is held (Holds): the view shows a held job's why as held.
	Held Holds
	// Appeals is the author's appeals (count plus the sum of their decision times): filing or
	// deciding one changes it.
	Appeals int64
}

// Due reports whether one of the author's jobs may be due at now (the bound has passed): the
// view then wakes the runner for the author, whose claim finds out which.
func (v *MineVersion) Due(now time.Time) bool {
	return v.NextDueAt != nil && !v.NextDueAt.After(now)
}

// WakeAt is when one of the author's jobs may come due after now (zero: none, or one may be due
// already).
func (v *MineVersion) WakeAt(now time.Time) time.Time {
	if v.NextDueAt == nil || !v.NextDueAt.After(now) {
		return time.Time{}
	}
	return *v.NextDueAt
}

// mineVersionSQL reads a MineVersion in one statement, each value by its key as a scalar
// subquery: the author's and the shared row of mine_versions, today's spend, the holds and the
// author's appeals. Its arguments: the author four times, the budget day, the author.
var mineVersionSQL = `SELECT (SELECT version FROM mine_versions WHERE user_id = ?),
		(SELECT jobs FROM mine_versions WHERE user_id = ?),
		(SELECT next_due_at FROM mine_versions WHERE user_id = ?),
		(SELECT version FROM mine_versions WHERE user_id = 0),
		(SELECT spent FROM budgets WHERE user_id = ? AND day = ?), ` + holdBits("") + `,
		(SELECT CAST(COUNT(*) + COALESCE(SUM(COALESCE(decided_at, 0)), 0) AS BIGINT) FROM reviews WHERE user_id = ? AND reason = 'appeal')
	FROM holds WHERE id = 1`

// MineVersion reads the version of the author's own view at now (see MineVersion), on the read
// pool, without reading any item or job.
func (s *Store) MineVersion(ctx context.Context, userID int64, now time.Time) (MineVersion, error) {
	v := MineVersion{Day: BudgetDay(now)}
	rows, err := s.query(ctx, s.read, mineVersionSQL, userID, userID, userID, userID, v.Day, userID)
	if err != nil {
		return v, fmt.Errorf("mine version of user %d: %w", userID, err)
	}
	defer rows.Close()
	if !rows.Next() {
		return v, fmt.Errorf("mine version of user %d: %w", userID, errors.Join(rows.Err(), errors.New("no holds row")))
	}
	r := newRow(7)
	if err := r.scan(rows); err != nil {
		return v, fmt.Errorf("mine version of user %d: %w", userID, err)
	}
	v.Version, v.Jobs, v.NextDueAt = r.int64Or(0), r.int64Or(1), r.timep(2)
	v.Shared, v.Spent, v.Held, v.Appeals = r.int64Or(3), r.int64Or(4), holdsOfBits(r.int64(5)), r.int64Or(6)
	if err := errors.Join(r.err, rows.Close()); err != nil {
		return v, fmt.Errorf("mine version of user %d: %w", userID, err)
	}
	return v, nil
}

// RaiseNextDue raises the author's kept bound on their earliest due time to that time, when
// the bound has passed at now and the earliest is later: the runner calls it after a sweep of
// the author, so that a job put off (a budget run out, a retry backing off) stops waking the
// runner at every view. One statement, which changes nothing when the author's version moved
// since its snapshot (a job came or went meanwhile: its own bound is then the kept one); a
// raise notifies the author's waiters, so that they wait for the new bound.
func (s *Store) RaiseNextDue(ctx context.Context, userID int64, now time.Time) error {
	n, err := s.exec(ctx, `UPDATE mine_versions SET next_due_at = x.next
		FROM (SELECT v.version AS seen, (SELECT due_at FROM content_jobs WHERE user_id = ? ORDER BY due_at LIMIT 1) AS next
			FROM mine_versions v WHERE v.user_id = ?) AS x
		WHERE mine_versions.user_id = ? AND mine_versions.version = x.seen
			AND mine_versions.next_due_at <= ? AND x.next > mine_versions.next_due_at`,
		userID, userID, userID, now.UnixMilli())
	if err != nil {
		return fmt.Errorf("raise the next due time of user %d: %w", userID, err)
	}
	if n > 0 {
		s.changed(userID)
	}
	return nil
}

// MineFilter selects and pages an author's own items.
type MineFilter struct {
	State ItemState // "" (any)
	Kind  Kind      // "" (any)
	Limit int       // at most this many items (> 0)
	// After, when set, starts the page after this item (see MineCursor).
	After *MineCursor
	// OwedJobs is the author's number of owed jobs as MineVersion read it (its Jobs), or nil
	// when not known. It only chooses how the page's jobs are read: an author with few jobs
	// has them read whole by their author (one short range of content_jobs_user_due), one with
	// many, or an unknown number, by the page's items (see pageJobs).
	OwedJobs *int64
}

// mineJobsByAuthor is the most owed jobs of an author that MinePage reads whole, by author,
// rather than by the page's items (up to two tasks for each kind and id of the page: hundreds
// of index probes for a page of 100).
const mineJobsByAuthor = 256

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
	for i, k := range mineKinds {
		if k.kind == kind {
			return i
		}
	}
	return -1
}

// mineKinds are the kinds of item in the view's order of kinds: each one's table and its
// columns song_id and title (NULL where the kind has none).
var mineKinds = [3]struct {
	kind       Kind
	table, own string
}{
	{KindRevision, "revisions", "x.song_id, x.title"},
	{KindComment, "comments", "x.song_id, CAST(NULL AS TEXT) AS title"},
	{KindPitch, "pitches", "CAST(NULL AS BIGINT) AS song_id, CAST(NULL AS TEXT) AS title"},
}

// mineColumns are the columns of a page's row, in the order scanMine reads them: the item (its
// kind's place, kind, id, time, song and title), its verdict and a revision's score.
const mineColumns = `x.k, x.kind, x.id, x.created_at, x.song_id, x.title, s.verdict, s.confidence,
	sc.art, sc.art_runs, sc.criteria, sc.model, sc.rubric`

// readMine reads a row of mineColumns.
func readMine(r *row) MineItem {
	it := MineItem{Kind: Kind(r.str(1)), ID: r.int64(2), CreatedAt: r.time(3), SongID: r.int64p(4), Title: r.strOr(5),
		Verdict: textp[Verdict](r, 6), Confidence: r.floatp(7)}
	it.Score = r.scoreAt(8, it.ID)
	return it
}

// mineStateFilter is the condition on an item (x) of kind ? that selects its state ("" selects
// any).
var mineStateFilter = map[ItemState]string{
	"":           "",
	StatePending: ` AND NOT EXISTS (SELECT 1 FROM screens s WHERE s.kind = ? AND s.item_id = x.id)`,
	StatePublic:  ` AND EXISTS (SELECT 1 FROM screens s WHERE s.kind = ? AND s.item_id = x.id AND s.verdict = 'allow')`,
	StateBlocked: ` AND EXISTS (SELECT 1 FROM screens s WHERE s.kind = ? AND s.item_id = x.id AND s.verdict = 'block')`,
}

// jobKey names the item a job is owed for.
type jobKey struct {
	kind Kind
	id   int64
}

// MinePage reads one page of the author's items that f selects, in the view's order (see
// MineCursor), each with its owed jobs. next is the cursor of the page's last item when more
// items follow, else nil. One statement (minePageSQL) reads each kind by its
// (user_id, created_at, id) index, at most Limit+1 rows, merges them and only then reads the
// page's verdicts and scores.
func (s *Store) MinePage(ctx context.Context, userID int64, f MineFilter) (items []MineItem, next *MineCursor, err error) {
	_, ok := mineStateFilter[f.State]
	afterRank := 0
	if f.After != nil {
		afterRank = KindRank(f.After.Kind)
	}
	switch {
	case f.Limit <= 0:
		return nil, nil, fmt.Errorf("mine page: limit %d", f.Limit)
	case !ok:
		return nil, nil, fmt.Errorf("mine page: unknown state %q", f.State)
	case afterRank < 0:
		return nil, nil, fmt.Errorf("mine page: cursor of unknown kind %q", f.After.Kind)
	case f.Kind != "" && KindRank(f.Kind) < 0:
		return nil, nil, fmt.Errorf("mine page: unknown kind %q", f.Kind)
	}
	sql, args := minePageSQL(userID, f, afterRank)
	rows, err := s.query(ctx, s.read, sql, args...)
	if err != nil {
		return nil, nil, fmt.Errorf("mine page: %w", err)
	}
	if items, err = scanMine(rows, min(f.Limit+1, 1024)); err != nil {
		return nil, nil, fmt.Errorf("mine page: %w", err)
	}
	if len(items) > f.Limit {
		items = items[:f.Limit]
		last := items[len(items)-1]
		next = &MineCursor{CreatedAt: last.CreatedAt.UnixMilli(), Kind: last.Kind, ID: last.ID}
	}
	if err := s.mineJobs(ctx, userID, items, f.OwedJobs); err != nil {
		return nil, nil, fmt.Errorf("mine page: jobs: %w", err)
	}
	return items, next, nil
}

// minePageSQL is MinePage's statement and its arguments: for each kind f selects, its items
// after the cursor in the state f selects, newest first, at most Limit+1 (read from the
// kind's (user_id, created_at, id) index); the first Limit+1 of them all in the view's order;
// and their verdicts and scores.
func minePageSQL(userID int64, f MineFilter, afterRank int) (string, []any) {
	var branches []string
	var args []any
	limit := int64(f.Limit) + 1
	for rank, k := range mineKinds {
		if f.Kind != "" && f.Kind != k.kind {
			continue
		}
		b := `SELECT ` + strconv.Itoa(rank) + ` AS k, '` + string(k.kind) + `' AS kind, x.id, x.created_at, ` + k.own + `
			FROM ` + k.table + ` x WHERE x.user_id = ?`
		args = append(args, userID)
		if c := f.After; c != nil {
			// Items of a kind ranked before the cursor's come first among equal times, so they
			// must be strictly older; the cursor's own kind continues by id (a row value, so
			// that the index is entered at the cursor); later kinds may share the cursor's time.
			switch {
			case rank < afterRank:
				b += ` AND x.created_at < ?`
				args = append(args, c.CreatedAt)
			case rank == afterRank:
				b += ` AND (x.created_at, x.id) < (?, ?)`
				args = append(args, c.CreatedAt, c.ID)
			default:
				b += ` AND x.created_at <= ?`
				args = append(args, c.CreatedAt)
			}
		}
		if cond := mineStateFilter[f.State]; cond != "" {
			b += cond
			args = append(args, k.kind)
		}
		branches = append(branches, `SELECT * FROM (`+b+` ORDER BY x.created_at DESC, x.id DESC LIMIT ?) AS b`+strconv.Itoa(rank))
		args = append(args, limit)
	}
	return `SELECT ` + mineColumns + `
		FROM (` + strings.Join(branches, ` UNION ALL `) + ` ORDER BY created_at DESC, k, id DESC LIMIT ?) AS x
		LEFT JOIN screens s ON s.kind = x.kind AND s.item_id = x.id
		LEFT JOIN scores sc ON x.k = 0 AND sc.revision_id = x.id
		ORDER BY x.created_at DESC, x.k, x.id DESC`, append(args, limit)
}

// scanMine reads rows of mineColumns and closes rows.
func scanMine(rows *queryRows, sizeHint int) ([]MineItem, error) {
	defer rows.Close()
	items := make([]MineItem, 0, sizeHint)
	r := newRow(13)
	for rows.Next() {
		if err := r.scan(rows); err != nil {
			return items, err
		}
		if it := readMine(r); r.err == nil {
			items = append(items, it)
		}
	}
	return items, errors.Join(rows.Err(), r.err)
}

// mineJobs gives the page's items their owed jobs: out of all of the author's when they have
// few (authorJobs), else by the page's items (pageJobs).
func (s *Store) mineJobs(ctx context.Context, userID int64, items []MineItem, owed *int64) error {
	if len(items) == 0 {
		return nil
	}
	if owed != nil && *owed <= mineJobsByAuthor {
		if done, err := s.authorJobs(ctx, userID, items); done || err != nil {
			return err
		}
	}
	return s.pageJobs(ctx, userID, items)
}

// authorJobs gives the page's items their owed jobs out of all of the author's, read by
// content_jobs_user_due, when the author has at most 2 × mineJobsByAuthor of them; else it
// reports false and gives none (the author's jobs grew since their number was read).
func (s *Store) authorJobs(ctx context.Context, userID int64, items []MineItem) (bool, error) {
	rows, err := s.query(ctx, s.read, authorJobsSQL, userID, 2*mineJobsByAuthor+1)
	if err != nil {
		return false, err
	}
	jobs, err := scanMineJobs(rows, userID, 16)
	if err != nil || len(jobs) > 2*mineJobsByAuthor {
		return false, err
	}
	slices.SortFunc(jobs, func(a, b Job) int { return cmp.Compare(a.ID, b.ID) })
	giveJobs(items, jobs)
	return true, nil
}

// giveJobs appends to each item its jobs out of jobs (in their order); jobs for other items
// are left out.
func giveJobs(items []MineItem, jobs []Job) {
	at := make(map[jobKey]int, len(items))
	for i := range items {
		at[jobKey{items[i].Kind, items[i].ID}] = i
	}
	for _, j := range jobs {
		if i, ok := at[jobKey{j.Kind, j.ItemID}]; ok {
			items[i].Jobs = append(items[i].Jobs, j)
		}
	}
}

// pageJobs reads the owed jobs of the page's items alone, in one statement by their
// (task, kind, item_id) keys (content_jobs' unique index), so a page costs the same whatever
// the author's backlog. The keys are the product of the tasks, the page's kinds and its ids;
// the few that name no item of the page are left out here. The author is a filter only
// (+user_id): by content_jobs_user_due a page would read every job of the author.
func (s *Store) pageJobs(ctx context.Context, userID int64, items []MineItem) error {
	ids := make([]int64, len(items))
	var kinds []string // the page's kinds, as SQL text: each one of Kinds
	for i := range items {
		ids[i] = items[i].ID
		if k := `'` + string(items[i].Kind) + `'`; KindRank(items[i].Kind) >= 0 && !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	idList, err := jsonParam(ids)
	if err != nil {
		return err
	}
	rows, err := s.query(ctx, s.read, `SELECT `+mineJobColumns+` FROM content_jobs
		WHERE +user_id = ? AND task IN ('screen', 'score') AND kind IN (`+strings.Join(kinds, ", ")+`)
		AND `+s.dialect.idIn("item_id")+` ORDER BY id`, userID, idList)
	if err != nil {
		return err
	}
	jobs, err := scanMineJobs(rows, userID, 0)
	if err != nil {
		return err
	}
	giveJobs(items, jobs)
	return nil
}

// authorJobsSQL reads an author's owed jobs (their first ones, by LIMIT) from
// content_jobs_user_due alone.
const authorJobsSQL = `SELECT ` + mineJobColumns + ` FROM content_jobs WHERE user_id = ? LIMIT ?`

// mineJobColumns are the columns of an owed job the author's view shows, in the order
// scanMineJobs reads them: all carried by content_jobs_user_due, so the author's jobs are read
// from that index alone.
const mineJobColumns = `id, task, kind, item_id, due_at, attempts, why`

// scanMineJobs reads rows of mineJobColumns, jobs of userID, and closes rows. The jobs have
// what the view shows; their status, lease and creation are not read.
func scanMineJobs(rows *queryRows, userID int64, sizeHint int) ([]Job, error) {
	return scanJobsBy(rows, 7, sizeHint, func(r *row) Job {
		return Job{ID: r.int64(0), Task: Task(r.str(1)), Kind: Kind(r.str(2)), ItemID: r.int64(3), UserID: userID,
			DueAt: r.time(4), Attempts: int(r.int64(5)), Why: textp[Why](r, 6)}
	})
}

// scoreAt is revision id's score in the five columns from i (art, art_runs, criteria, model,
// rubric), or nil when art is NULL (not scored).
func (r *row) scoreAt(i int, id int64) *Score {
	if r.vals[i] == nil {
		return nil
	}
	sc := scoreRow{RevisionID: id, Art: r.float(i), ArtRuns: r.strOr(i + 1), Criteria: r.strOr(i + 2),
		Model: r.strOr(i + 3), Rubric: r.strOr(i + 4)}.score()
	return &sc
}

// strOr is the text in column i, or "" for NULL.
func (r *row) strOr(i int) string {
	if r.vals[i] == nil {
		return ""
	}
	return r.str(i)
}

// int64Or is the integer in column i, or 0 for NULL.
func (r *row) int64Or(i int) int64 {
	if r.vals[i] == nil {
		return 0
	}
	return r.int64(i)
}
