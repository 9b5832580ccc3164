package models

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
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
	// Jobs are the item's owed jobs; read by MinePage, they have what the view shows (see
	// mineJobColumns): no status, lease or creation time.
	Jobs []Job
}

// MineVersion is what an author's own view (Mine, and their budget) is made of, kept by the
// database (migration 0015) so that the view's ETag is known before the view is built, from one
// row read by key whatever the author's backlog:
//
//   - Version, the author's change counter (mine_versions): the triggers on every table the
//     view shows — items, owed jobs, verdicts, scores, budget charges, the daily limit — bump it
//     in the transaction that changes the view, so it differs after every change, by the store
//     or by raw SQL, and never comes back (it only grows);
//   - Shared, the counter of what every view shares (mine_versions row 0: the holds);
//   - the spend on the budget day of now (the budget day is in the ETag).
//
// The same row keeps the author's number of owed jobs and their earliest due time, so the view
// knows whether to wake the author's jobs, and when to look again, without reading them.
type MineVersion struct {
	Day     string // the budget day of now
	Version int64  // the author's change counter (0: never changed)
	Shared  int64  // the counter of what every view shares (the holds)
	Spent   int64  // spent on Day
	Jobs    int64  // the author's owed jobs
	// NextDueAt is no later than the earliest due time of the author's jobs (nil: none): the
	// kept bound, or, once it has passed with nothing due, the earliest itself.
	NextDueAt *time.Time
	// Due reports whether one of the author's jobs is due at now: due_at passed, no lease holds
	// it and its task is not held (the same test a claim makes), i.e. whether a sweep of the
	// author would find anything.
	Due bool
	// WakeAt is when one of the author's jobs that is not due at now may come due (its due
	// time, or the end of its lease); zero when none will without a change.
	WakeAt time.Time
	// Held is what is held (Holds): the view shows a held job's why as held.
	Held Holds
	// Appeals is the author's appeals (count plus the sum of their decision times, in the
	// column of a job's due time in the statement's union): filing or deciding one changes it.
	Appeals int64
}

// mineVersionByScalars reads a MineVersion's kept rows in one statement: the author's and the
// shared row of mine_versions, today's spend and the holds, each by its key; and the author's
// appeals (count plus the sum of their decision times: filing or deciding one changes it), which
// the kept counter does not follow. Each read is a scalar subquery, a search by key whatever
// the planner's statistics say (see dialect.scalarKeyReads). Its arguments: the author four
// times, the budget day, the author.
var mineVersionByScalars = `SELECT (SELECT version FROM mine_versions WHERE user_id = ?),
		(SELECT jobs FROM mine_versions WHERE user_id = ?),
		(SELECT next_due_at FROM mine_versions WHERE user_id = ?),
		(SELECT version FROM mine_versions WHERE user_id = 0),
		(SELECT spent FROM budgets WHERE user_id = ? AND day = ?), ` + holdBits("") + `,
		` + mineAppeals + `
	FROM holds WHERE id = 1`

// mineVersionByJoins is mineVersionByScalars as LEFT JOINs on the keys, one probe of the
// author's row rather than one per column. Its arguments: the author three times, the day.
var mineVersionByJoins = `SELECT v.version, v.jobs, v.next_due_at, g.version, b.spent, ` + holdBits("h.") + `,
		` + mineAppeals + `
	FROM holds h
	LEFT JOIN mine_versions v ON v.user_id = ?
	LEFT JOIN mine_versions g ON g.user_id = 0
	LEFT JOIN budgets b ON b.user_id = ? AND b.day = ?
	WHERE h.id = 1`

// mineAppeals is the author's appeals as MineVersion keeps them: their count plus the sum of
// their decision times.
const mineAppeals = `(SELECT CAST(COUNT(*) + COALESCE(SUM(COALESCE(decided_at, 0)), 0) AS BIGINT) FROM reviews WHERE user_id = ? AND reason = 'appeal')`

// mineDueProbe bounds how many of the author's jobs due by now MineVersion reads to tell
// whether one of them is free to claim (the others are leased or held).
const mineDueProbe = 64

// MineVersion reads the version of the author's own view at now (see MineVersion), on the
// read pool, without reading any item: one row by key, and, only when the kept bound of the
// author's earliest due time has passed, their first jobs in due order (by
// content_jobs_user_due, at most mineDueProbe+1): those due by now, to tell a job free to claim
// from one leased or held, and the first due later, the view's next wake.
func (s *Store) MineVersion(ctx context.Context, userID int64, now time.Time) (MineVersion, error) {
	v := MineVersion{Day: BudgetDay(now)}
	q, args := mineVersionByJoins, []any{userID, userID, userID, v.Day}
	if s.dialect.scalarKeyReads() {
		q, args = mineVersionByScalars, []any{userID, userID, userID, userID, v.Day, userID}
	}
	rows, err := s.query(s.dialect.keyRead(ctx), s.read, q, args...)
	if err != nil {
		return v, fmt.Errorf("mine version of user %d: %w", userID, err)
	}
	r := newRow(7)
	found := false
	for rows.Next() {
		if err := r.scan(rows); err != nil {
			rows.Close()
			return v, fmt.Errorf("mine version of user %d: %w", userID, err)
		}
		found = true
		if r.vals[0] != nil {
			v.Version, v.Jobs = r.int64(0), r.int64(1)
			v.NextDueAt = r.timep(2)
		}
		if r.vals[3] != nil {
			v.Shared = r.int64(3)
		}
		if r.vals[4] != nil {
			v.Spent = r.int64(4)
		}
		v.Held = holdsOfBits(r.int64(5))
		if r.vals[6] != nil {
			v.Appeals = r.int64(6)
		}
	}
	err = errors.Join(rows.Err(), rows.Close(), r.err)
	if err == nil && !found {
		err = errors.New("no holds row")
	}
	if err != nil {
		return v, fmt.Errorf("mine version of user %d: %w", userID, err)
	}
	if v.NextDueAt == nil {
		return v, nil
	}
	if v.NextDueAt.After(now) {
		v.WakeAt = *v.NextDueAt
		return v, nil
	}
	// A transaction's store has no memo: a version read there may yet roll back, and be reused.
	remember := s.nextDue != nil
	if remember {
		if next, ok := s.nextDue.get(userID, v.Version); ok && next.After(now) {
			v.NextDueAt, v.WakeAt = &next, next
			return v, nil
		}
	}
	// The earliest job is due by now: is one free to claim? One statement reads the author's
	// jobs in due order: those due by now (at most mineDueProbe), and the first that is not,
	// which is when the author's jobs next come due.
	rows, err = s.query(ctx, s.read, `SELECT due_at, lease_until, task FROM content_jobs
		WHERE user_id = ? ORDER BY due_at LIMIT ?`, userID, mineDueProbe+1)
	if err != nil {
		return v, fmt.Errorf("mine version of user %d: due jobs: %w", userID, err)
	}
	r = newRow(3)
	n := 0
	var later *time.Time // the earliest due time after now
	for rows.Next() {
		if err := r.scan(rows); err != nil {
			rows.Close()
			return v, fmt.Errorf("mine version of user %d: due jobs: %w", userID, err)
		}
		due, lease, task := r.time(0), r.timep(1), Task(r.str(2))
		if due.After(now) {
			later = &due
			break
		}
		n++
		switch {
		case v.Held.Task(task):
			// lifting the hold changes the shared version
		case lease == nil || !lease.After(now):
			v.Due = true
		case v.WakeAt.IsZero() || lease.Before(v.WakeAt):
			v.WakeAt = *lease
		}
	}
	if err := errors.Join(rows.Err(), rows.Close(), r.err); err != nil {
		return v, fmt.Errorf("mine version of user %d: due jobs: %w", userID, err)
	}
	if n == 0 {
		// The kept bound has passed, yet nothing is due: the earliest job comes later.
		v.NextDueAt = later
		if later != nil {
			v.WakeAt = *later
			if remember {
				s.nextDue.put(userID, v.Version, *later)
			}
		}
		return v, nil
	}
	if later != nil && !v.Due && (v.WakeAt.IsZero() || later.Before(v.WakeAt)) {
		v.WakeAt = *later // the jobs due now are leased or held; the next comes due first
	}
	if !v.Due && n > mineDueProbe {
		// More are due than were read, all of these leased or held: look again soon.
		if soon := now.Add(time.Minute); v.WakeAt.IsZero() || soon.Before(v.WakeAt) {
			v.WakeAt = soon
		}
	}
	return v, nil
}

// dueMemo remembers, per author, the earliest due time of their jobs that MineVersion's probe
// found at a version of the author's view when none of the jobs was due yet. The kept bound
// (mine_versions.next_due_at) only ever moves earlier, as jobs come and are put off, so once
// it has passed, every read of an author whose jobs were put off (a budget run out, a retry
// backing off: the backlogs that poll the most) would probe their jobs again. No job of the
// author is made, ended or moved without a new version (the triggers bump it with every
// change of what the view shows), and a committed version is never read again for another
// state, so at the same version the earliest due time is the same. At most dueMemoMax
// authors are remembered; when full, it starts again empty.
type dueMemo struct {
	mu sync.Mutex
	m  map[int64]dueSeen
}

// dueSeen is what dueMemo keeps of an author: the version and the earliest due time then.
type dueSeen struct {
	version int64
	next    time.Time
}

// dueMemoMax bounds dueMemo: about 3 MB at its fullest.
const dueMemoMax = 1 << 16

func newDueMemo() *dueMemo { return &dueMemo{m: map[int64]dueSeen{}} }

// get is the earliest due time of the author's jobs at version, if remembered.
func (d *dueMemo) get(userID, version int64) (time.Time, bool) {
	d.mu.Lock()
	seen, ok := d.m[userID]
	d.mu.Unlock()
	if !ok || seen.version != version {
		return time.Time{}, false
	}
	return seen.next, true
}

// put remembers the earliest due time of the author's jobs at version.
func (d *dueMemo) put(userID, version int64, next time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.m[userID]; !ok && len(d.m) >= dueMemoMax {
		clear(d.m)
	}
	d.m[userID] = dueSeen{version: version, next: next}
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
		sc.art, sc.art_runs, sc.criteria, sc.model, sc.rubric, s.public_reason
		FROM revisions r LEFT JOIN screens s ON s.kind = 'revision' AND s.item_id = r.id
		LEFT JOIN scores sc ON sc.revision_id = r.id
		WHERE r.user_id = ?`, 12, func(r *row, it *MineItem) {
		it.SongID, it.Title, it.CreatedAt = r.int64p(1), r.str(2), r.time(3)
		it.Verdict, it.Confidence = textp[Verdict](r, 4), r.floatp(5)
		it.Score = r.scoreAt(6, it.ID)
		it.Reason = r.strp(11)
	}},
	{KindComment, "c", `SELECT c.id, c.song_id, c.created_at, s.verdict, s.confidence, s.public_reason
		FROM comments c LEFT JOIN screens s ON s.kind = 'comment' AND s.item_id = c.id
		WHERE c.user_id = ?`, 6, func(r *row, it *MineItem) {
		it.SongID, it.CreatedAt, it.Verdict, it.Confidence = r.int64p(1), r.time(2), textp[Verdict](r, 3), r.floatp(4)
		it.Reason = r.strp(5)
	}},
	{KindPitch, "p", `SELECT p.id, p.created_at, s.verdict, s.confidence, s.public_reason
		FROM pitches p LEFT JOIN screens s ON s.kind = 'pitch' AND s.item_id = p.id
		WHERE p.user_id = ?`, 5, func(r *row, it *MineItem) {
		it.CreatedAt, it.Verdict, it.Confidence = r.time(1), textp[Verdict](r, 2), r.floatp(3)
		it.Reason = r.strp(4)
	}},
}

// mineStateFilter is the condition on an item's verdict (the column verdict) that selects its
// state ("" selects any).
var mineStateFilter = map[ItemState]string{
	"":           "",
	StatePending: `verdict IS NULL`,
	StatePublic:  `verdict = 'allow'`,
	StateBlocked: `verdict = 'block'`,
}

// jobKey names the item a job is owed for.
type jobKey struct {
	kind Kind
	id   int64
}

// MinePage reads one page of the author's items that f selects, in the view's order (see
// MineCursor), each with its jobs out of jobs (the author's, as MineVersion read them). next
// is the cursor of the page's last item when more items follow, else nil. Where the dialect
// keeps the view's rows (mine_rows, SQLite) a page of every kind is one range of them, at most
// Limit+1 rows; otherwise, and for one kind's page, each kind is read by its
// (user_id, created_at, id) index, at most Limit+1 rows, and the kinds are merged.
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
	if s.dialect.keptMineRows() && f.Kind == "" {
		// One kind's page reads that kind's own index below: in mine_rows a rare kind would be
		// a filter over every item of the author.
		if items, err = s.mineRows(ctx, userID, f, stateSQL, byItem); err != nil {
			return nil, nil, fmt.Errorf("mine page: %w", err)
		}
	} else {
		if stateSQL != "" {
			stateSQL = ` AND s.` + stateSQL
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
	}
	if len(items) > f.Limit {
		items = items[:f.Limit]
		last := items[len(items)-1]
		next = &MineCursor{CreatedAt: last.CreatedAt.UnixMilli(), Kind: last.Kind, ID: last.ID}
	}
	if jobs == nil && len(items) > 0 {
		few := f.OwedJobs != nil && *f.OwedJobs <= mineJobsByAuthor
		if few {
			few, err = s.authorJobs(ctx, userID, items)
		}
		if err == nil && !few {
			err = s.pageJobs(ctx, userID, items)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("mine page: jobs: %w", err)
		}
	}
	return items, next, nil
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
// scanMineJobs reads them: all carried by content_jobs_user_due (migration 0027), so the
// author's jobs are read from that index alone.
const mineJobColumns = `id, task, kind, item_id, due_at, attempts, why`

// scanMineJobs reads rows of mineJobColumns, jobs of userID, and closes rows. The jobs have
// what the view shows; their status, lease and creation are not read.
func scanMineJobs(rows *queryRows, userID int64, sizeHint int) ([]Job, error) {
	return scanJobsBy(rows, 7, sizeHint, func(r *row) Job {
		return Job{ID: r.int64(0), Task: Task(r.str(1)), Kind: Kind(r.str(2)), ItemID: r.int64(3), UserID: userID,
			DueAt: r.time(4), Attempts: int(r.int64(5)), Why: textp[Why](r, 6)}
	})
}

// kindOrder is a kind's kind_order in mine_rows: the view's order of kinds (KindRank) read
// backwards, so that the view's order is the table's key descending.
func kindOrder(kind Kind) int { return len(mineQueries) - 1 - KindRank(kind) }

// mineRows reads the page's candidates from the author's kept rows (mine_rows, where the
// dialect keeps them): one range of its key, entered at the cursor, at most f.Limit+1 rows in
// the view's order, in the state cond selects (see mineStateFilter), each with its jobs. It
// reads every kind (f.Kind is not its to filter: see MinePage).
func (s *Store) mineRows(ctx context.Context, userID int64, f MineFilter, cond string, byItem map[jobKey][]Job) ([]MineItem, error) {
	sql, args := mineRowsSQL(userID, f, cond)
	rows, err := s.query(ctx, s.read, sql, args...)
	if err != nil {
		return nil, err
	}
	// The items' optional values live in one array per page rather than one allocation each.
	size := min(f.Limit+1, 1024)
	optional := make([]struct {
		song       int64
		verdict    Verdict
		confidence float64
	}, 0, size)
	return appendMineItems(rows, 13, byItem, make([]MineItem, 0, size), func(r *row) (MineItem, error) {
		order := r.int64(0)
		if order < 0 || order >= int64(len(mineQueries)) {
			return MineItem{}, fmt.Errorf("mine_rows: kind_order %d", order)
		}
		it := MineItem{Kind: mineQueries[len(mineQueries)-1-int(order)].kind, ID: r.int64(1),
			Title: r.strOr(3), CreatedAt: r.time(4)}
		if len(optional) == cap(optional) {
			optional = slices.Grow(optional[len(optional):], size)
		}
		optional = optional[:len(optional)+1]
		o := &optional[len(optional)-1]
		if r.vals[2] != nil {
			o.song, it.SongID = r.int64(2), &o.song
		}
		if r.vals[5] != nil {
			o.verdict, it.Verdict = Verdict(r.str(5)), &o.verdict
		}
		if r.vals[6] != nil {
			o.confidence, it.Confidence = r.float(6), &o.confidence
		}
		it.Score = r.scoreAt(7, it.ID)
		it.Reason = r.strp(12)
		return it, nil
	})
}

// appendMineItems appends to items an item for each of rows (of columns columns), as read
// makes it from the row, with its jobs out of byItem.
func appendMineItems(rows *queryRows, columns int, byItem map[jobKey][]Job, items []MineItem,
	read func(r *row) (MineItem, error)) ([]MineItem, error) {
	defer rows.Close()
	r := newRow(columns)
	for rows.Next() {
		if err := r.scan(rows); err != nil {
			return items, err
		}
		it, err := read(r)
		if err == nil {
			err = r.err
		}
		if err != nil {
			return items, err
		}
		it.Jobs = byItem[jobKey{it.Kind, it.ID}]
		items = append(items, it)
	}
	return items, rows.Err()
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

// mineRowsSQL is mineRows' statement and its arguments.
func mineRowsSQL(userID int64, f MineFilter, cond string) (string, []any) {
	// mine_rows keeps no reason: a verdict's is read from screens, by its key.
	sql := `SELECT kind_order, id, song_id, title, created_at, verdict, confidence, art, art_runs, criteria, model, rubric,
		CASE WHEN verdict IS NOT NULL THEN (SELECT public_reason FROM screens
			WHERE kind = CASE kind_order WHEN 2 THEN 'revision' WHEN 1 THEN 'comment' ELSE 'pitch' END AND item_id = mine_rows.id) END
		FROM mine_rows WHERE user_id = ?`
	args := []any{userID}
	if c := f.After; c != nil {
		sql += ` AND (created_at, kind_order, id) < (?, ?, ?)`
		args = append(args, c.CreatedAt, kindOrder(c.Kind), c.ID)
	}
	if cond != "" {
		sql += ` AND ` + cond
	}
	sql += ` ORDER BY created_at DESC, kind_order DESC, id DESC LIMIT ?`
	return sql, append(args, int64(f.Limit)+1)
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
			// A row value, so that the index is entered at the cursor: written as an OR, SQLite
			// 3.54 reads every older item of the author by each branch and sorts them all.
			sql += ` AND (` + a + `.created_at, ` + a + `.id) < (?, ?)`
			args = append(args, c.CreatedAt, c.ID)
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
	return appendMineItems(rows, q.columns, byItem, items, func(r *row) (MineItem, error) {
		it := MineItem{Kind: q.kind, ID: r.int64(0)}
		q.read(r, &it)
		return it, nil
	})
}

// strOr is the text in column i, or "" for NULL.
func (r *row) strOr(i int) string {
	if r.vals[i] == nil {
		return ""
	}
	return r.str(i)
}
