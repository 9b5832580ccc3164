package api

import (
	"context"
	"sync"

	"github.com/owed/owed/models"
	"github.com/owed/owed/notify"
)

// mineMemoryMax bounds the authors whose version is kept in memory (a few hundred bytes each).
const mineMemoryMax = 100_000

// mineMemory keeps, per author, the version of their view last read from the database, with a
// notify.VersionMark taken before that read: while the mark has not fired, nothing the view shows has
// changed since (the notifier hears every change: in-process at each commit on SQLite, by
// LISTEN on PostgreSQL, and wakes everything after a reconnect), so a poll whose If-None-Match
// names the view at that version gets its 304 without reading the version again. On
// PostgreSQL a notification is heard a moment after its commit, so the answer first waits for
// notify's Sync, a round trip on the LISTEN connection shared by every request that arrives
// meanwhile, after which every change committed before the request has been heard: a 304 never
// hides a change that committed before the request came.
type mineMemory struct {
	mu     sync.Mutex
	byUser map[int64]*mineMemo
}

type mineMemo struct {
	mark  notify.VersionMark
	v     models.MineVersion
	limit int64 // the author's effective daily limit when read
}

// keep remembers v as u's version, read after mark was taken; it takes the mark over.
func (m *mineMemory) keep(u *models.User, mark notify.VersionMark, v models.MineVersion) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old := m.byUser[u.ID]; old != nil {
		old.mark.Release()
	} else if len(m.byUser) >= mineMemoryMax {
		for id, e := range m.byUser { // any one: map order is random
			e.mark.Release()
			delete(m.byUser, id)
			break
		}
	}
	m.byUser[u.ID] = &mineMemo{mark: mark, v: v, limit: u.DailyLimit}
}

// forget drops u's version if it is still e.
func (m *mineMemory) forget(userID int64, e *mineMemo) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.byUser[userID] == e {
		e.mark.Release()
		delete(m.byUser, userID)
	}
}

// mineFromMemory is u's view state at now from memory, when it is known to be current: kept,
// unchanged since (after Sync on PostgreSQL), of today's budget day and u's limit. As the view
// must, it starts a sweep of u's jobs when one is due by now (the kept earliest due time or
// lease end), and forgets the version then, so the next request reads it afresh.
func (a *API) mineFromMemory(ctx context.Context, u *models.User, q *mineQuery) (mineState, bool) {
	m := a.memory
	m.mu.Lock()
	e := m.byUser[u.ID]
	m.mu.Unlock()
	now := a.now()
	if e == nil || e.limit != u.DailyLimit || e.v.Day != models.BudgetDay(now) || e.mark.Changed() {
		if e != nil {
			m.forget(u.ID, e)
		}
		return mineState{}, false
	}
	if !a.Notify.Sync(ctx) || e.mark.Changed() {
		return mineState{}, false
	}
	v := e.v
	if v.Due || (!v.WakeAt.IsZero() && !now.Before(v.WakeAt)) {
		a.Content.SweepAuthor(u.ID)
		m.forget(u.ID, e)
	}
	return mineState{v: v, limit: u.DailyLimit, etag: mineETag(u.ID, u.DailyLimit, &v, q), now: now}, true
}

// readMineKept is readMine that keeps what it read in memory for the next poll.
func (a *API) readMineKept(ctx context.Context, u *models.User, q *mineQuery) (mineState, error) {
	mark := a.Notify.MarkVersion(u.ID) // before the read, so no change falls between the two
	st, err := a.readMine(ctx, u, q)
	if err != nil || st.v.Due {
		mark.Release() // a due job: the sweep just started will change the view
		return st, err
	}
	a.memory.keep(u, mark, st.v)
	return st, nil
}
