package models

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
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
	Reason     *string // the verdict's public reason (screens.public_reason), from a moderator
	Score      *Score
	// Jobs are the item's owed jobs with what the view shows (mineJobColumns).
	Jobs []Job
}

// MineVersion is what an author's own view is made of, read from mine_versions (kept by
// triggers) so the view's ETag is known before the view is built: the author's change counter,
// the shared counter (the holds), today's spend and the author's appeals, with the author's
// number of owed jobs and a bound on their earliest due time.
type MineVersion struct {
	Day     string // the budget day of now
	Version int64  // the author's change counter (0: never changed)
	Shared  int64  // the counter of what every view shares (the holds)
	Spent   int64  // spent on Day
	Jobs    int64  // the author's owed jobs
	// NextDueAt is no later than the author's earliest due time (nil: none); see RaiseNextDue.
	NextDueAt *time.Time
	// Held is what is held (Holds): the view shows a held job's why as held.
	Held Holds
	// Appeals is the author's appeals (count plus the sum of their decision times).
	Appeals int64
}

// Due reports whether one of the author's jobs may be due at now (the bound has passed).
func (v *MineVersion) Due(now time.Time) bool {
	return v.NextDueAt != nil && !v.NextDueAt.After(now)
}

// WakeAt is when one of the author's jobs may come due after now (zero: none, or due already).
func (v *MineVersion) WakeAt(now time.Time) time.Time {
	if v.NextDueAt == nil || !v.NextDueAt.After(now) {
		return time.Time{}
	}
	return *v.NextDueAt
}

// mineVersionSQL reads a MineVersion (arguments: the author four times, the day, the author).
var mineVersionSQL = `SELECT (SELECT version FROM mine_versions WHERE user_id = ?),
		(SELECT jobs FROM mine_versions WHERE user_id = ?),
		(SELECT next_due_at FROM mine_versions WHERE user_id = ?),
		(SELECT version FROM mine_versions WHERE user_id = 0),
		(SELECT spent FROM budgets WHERE user_id = ? AND day = ?), ` + holdBits("") + `,
		(SELECT CAST(COUNT(*) + COALESCE(SUM(COALESCE(decided_at, 0)), 0) AS BIGINT) FROM reviews WHERE user_id = ? AND reason = 'appeal')
	FROM holds WHERE id = 1`

// MineVersion reads the version of the author's own view at now, reading no item or job.
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

// RaiseNextDue raises the author's kept bound on their earliest due time when it has passed at
// now and the earliest is later, so a job put off stops waking the runner at every view. It
// changes nothing when the author's version moved since its snapshot; a raise notifies.
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
	// OwedJobs is the author's owed jobs as MineVersion read them (nil: unknown); it only
	// chooses whether the page's jobs are read by author or by the page's items (pageJobs).
	OwedJobs *int64
}

// mineJobsByAuthor is the most owed jobs of an author MinePage reads whole, by author.
const mineJobsByAuthor = 256

// MineCursor is a place in an author's items, newest first across kinds: created_at
// descending, then kind (revision, comment, pitch), then id descending, a total order.
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

// mineColumns are an item's columns the view shows whatever its kind, in readMine's order.
const mineColumns = `x.id, x.created_at, s.verdict, s.confidence, s.public_reason`

// readMine reads mineColumns into it.
func readMine(r *row, it *MineItem) {
	it.ID, it.CreatedAt, it.Verdict, it.Confidence, it.Reason = r.int64(0), r.time(1), textp[Verdict](r, 2), r.floatp(3), r.strp(4)
}

// mineOwn is where a kind's own columns start.
const mineOwn = 5

// mineQueries read an author's items, one kind each, in the view's order of kinds, through the
// items' covering index: the statement, its number of columns, and how its own become the item's.
var mineQueries = [3]mineKindQuery{
	mineQuery(KindRevision, "revisions", `x.song_id, x.title, sc.art, sc.art_runs, sc.criteria, sc.model, sc.rubric`,
		` LEFT JOIN scores sc ON sc.revision_id = x.id`, func(r *row, it *MineItem) {
			it.SongID, it.Title, it.Score = r.int64p(mineOwn), r.str(mineOwn+1), r.scoreAt(mineOwn+2, it.ID)
		}),
	mineQuery(KindComment, "comments", `x.song_id`, ``, func(r *row, it *MineItem) { it.SongID = r.int64p(mineOwn) }),
	mineQuery(KindPitch, "pitches", ``, ``, func(*row, *MineItem) {}),
}

// mineKindQuery is how one kind of item is read for the view.
type mineKindQuery struct {
	kind    Kind
	sql     string
	columns int
	read    func(r *row, it *MineItem)
}

// mineQuery is the entry of mineQueries of kind, in table, with its own columns and joins.
func mineQuery(kind Kind, table, own, joins string, read func(r *row, it *MineItem)) (q mineKindQuery) {
	cols := mineColumns
	if own != "" {
		cols += ", " + own
	}
	q.kind, q.read, q.columns = kind, read, strings.Count(cols, ",")+1
	q.sql = `SELECT ` + cols + ` FROM ` + table + ` x LEFT JOIN screens s ON s.kind = '` + string(kind) + `' AND s.item_id = x.id` +
		joins + ` WHERE x.user_id = ?`
	return q
}

// mineStateFilter is the condition on an item's verdict that selects its state. coalesce keeps
// the join a LEFT JOIN, so SQLite walks the author's items in order.
var mineStateFilter = map[ItemState]string{
	"":           "",
	StatePending: ` AND s.verdict IS NULL`,
	StatePublic:  ` AND coalesce(s.verdict, '') = 'allow'`,
	StateBlocked: ` AND coalesce(s.verdict, '') = 'block'`,
}

// jobKey names the item a job is owed for.
type jobKey struct {
	kind Kind
	id   int64
}

// MinePage reads one page of the author's items f selects, with their jobs; next: the next cursor.
func (s *Store) MinePage(ctx context.Context, userID int64, f MineFilter) (items []MineItem, next *MineCursor, err error) {
	stateSQL, ok := mineStateFilter[f.State]
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
	}
	for rank := range mineQueries {
		if f.Kind != "" && f.Kind != mineQueries[rank].kind {
			continue
		}
		if items, err = s.mineKind(ctx, rank, userID, f, afterRank, stateSQL, items); err != nil {
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
	if err := s.mineJobs(ctx, userID, items, f.OwedJobs); err != nil {
		return nil, nil, fmt.Errorf("mine page: jobs: %w", err)
	}
	return items, next, nil
}

// mineJobs gives the page's items their owed jobs (authorJobs when few, else pageJobs).
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

// authorJobs gives the items their jobs out of all the author's, unless they have too many.
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

// giveJobs appends to each item its jobs out of jobs, in their order.
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

// pageJobs reads the owed jobs of the page's items alone, in one statement by their (task,
// kind, item_id) keys, so a page costs the same whatever the author's backlog; the author is a
// filter only.
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

// authorJobsSQL reads an author's first owed jobs from content_jobs_user_due alone.
const authorJobsSQL = `SELECT ` + mineJobColumns + ` FROM content_jobs WHERE user_id = ? LIMIT ?`

// mineJobColumns are an owed job's columns the view shows, all in content_jobs_user_due.
const mineJobColumns = `id, task, kind, item_id, due_at, attempts, why`

// scanMineJobs reads rows of mineJobColumns as jobs of userID, and closes rows.
func scanMineJobs(rows *queryRows, userID int64, sizeHint int) ([]Job, error) {
	return scanJobsBy(rows, 7, sizeHint, func(r *row) Job {
		return Job{ID: r.int64(0), Task: Task(r.str(1)), Kind: Kind(r.str(2)), ItemID: r.int64(3), UserID: userID,
			DueAt: r.time(4), Attempts: int(r.int64(5)), Why: textp[Why](r, 6)}
	})
}

// scoreAt is revision id's score in the five columns from i, or nil when art is NULL.
func (r *row) scoreAt(i int, id int64) *Score {
	if r.vals[i] == nil {
		return nil
	}
	sc := scoreRow{RevisionID: id, Art: r.float(i), ArtRuns: r.strOr(i + 1), Criteria: r.strOr(i + 2),
		Model: r.strOr(i + 3), Rubric: r.strOr(i + 4)}.score()
	return &sc
}

// mineKind appends to items at most f.Limit+1 items of one kind after the cursor, in stateSQL's state.
func (s *Store) mineKind(ctx context.Context, rank int, userID int64, f MineFilter, afterRank int, stateSQL string,
	items []MineItem) ([]MineItem, error) {
	q := mineQueries[rank]
	sql, args := mineKindSQL(rank, userID, f, afterRank, stateSQL)
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
		it := MineItem{Kind: q.kind}
		readMine(r, &it)
		q.read(r, &it)
		if r.err != nil {
			return items, r.err
		}
		items = append(items, it)
	}
	return items, rows.Err()
}

// mineKindSQL is mineKind's statement and its arguments.
func mineKindSQL(rank int, userID int64, f MineFilter, afterRank int, stateSQL string) (string, []any) {
	sql, args := mineQueries[rank].sql, []any{userID}
	if c := f.After; c != nil {
		// Kinds ranked before the cursor's must be strictly older; the cursor's own kind
		// continues by id; later kinds may share its time.
		switch {
		case rank < afterRank:
			sql += ` AND x.created_at < ?`
			args = append(args, c.CreatedAt)
		case rank == afterRank:
			// A row value enters the index at the cursor (an OR makes SQLite read and sort them all).
			sql += ` AND (x.created_at, x.id) < (?, ?)`
			args = append(args, c.CreatedAt, c.ID)
		default:
			sql += ` AND x.created_at <= ?`
			args = append(args, c.CreatedAt)
		}
	}
	return sql + stateSQL + ` ORDER BY x.created_at DESC, x.id DESC LIMIT ?`, append(args, int64(f.Limit)+1)
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
