package models_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// A revision without a title keeps the song's; one with a new title renames the song.
func TestCreateRevisionTitles(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		ann := f.User("ann")
		song, _, err := f.store.CreateSong(f.ctx, ann, "First", "v1")
		if err != nil {
			t.Fatal(err)
		}
		title := func() string {
			t.Helper()
			s, err := f.store.SongByID(f.ctx, song.ID)
			if err != nil {
				t.Fatal(err)
			}
			return s.Title
		}
		same, err := f.store.CreateRevision(f.ctx, ann, song.ID, "", "v2")
		if err != nil || same.ID == 0 || same.Title != "First" || title() != "First" {
			t.Errorf("a revision without a title: %+v, %v; song titled %q; want the song's title kept", same, err, title())
		}
		renamed, err := f.store.CreateRevision(f.ctx, ann, song.ID, "Second", "v3")
		if err != nil || renamed.ID == 0 || renamed.Title != "Second" || title() != "Second" {
			t.Errorf("a revision with a new title: %+v, %v; song titled %q; want both Second", renamed, err, title())
		}
		if _, err := f.store.CreateRevision(f.ctx, f.User("bob"), song.ID, "Third", "v4"); !errors.Is(err, models.ErrNotFound) || title() != "Second" {
			t.Errorf("another author's revision: %v, song titled %q; want not found and the title kept", err, title())
		}
	})
}

// A comment goes on a public song, or on the author's own; another author's song that is not
// public answers as a missing one.
func TestCreateCommentOnlyOnSongsTheAuthorSees(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		ann, bob := f.User("ann"), f.User("bob")
		public := f.publicSong(ann, "Public", nil)
		pending, _ := f.rawSong(ann, "Pending", "code")
		if c, err := f.store.CreateComment(f.ctx, bob, public, "nice"); err != nil || c.ID == 0 {
			t.Errorf("bob on ann's public song: %+v, %v; want made", c, err)
		}
		if _, err := f.store.CreateComment(f.ctx, bob, pending, "hm"); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("bob on ann's pending song: %v, want not found", err)
		}
		if c, err := f.store.CreateComment(f.ctx, ann, pending, "mine"); err != nil || c.ID == 0 {
			t.Errorf("ann on her own pending song: %+v, %v; want made", c, err)
		}
	})
}

// A request's hook sees what each write made, in the transaction that made it: a song and its
// first revision, a revision, a comment, a pitch.
func TestRequestHookSeesWhatWasMade(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		ann := f.User("ann")
		made := func(write func(ctx context.Context) error) []any {
			t.Helper()
			var got []any
			ctx := models.WithRequest(f.ctx, &models.Request{Hook: func(_ context.Context, _ *models.Store, m []any) error {
				got = append(got, m...)
				return nil
			}})
			if err := write(ctx); err != nil {
				t.Fatal(err)
			}
			return got
		}
		var song models.Song
		if got := made(func(ctx context.Context) (err error) {
			song, _, err = f.store.CreateSong(ctx, ann, "S", "v1")
			return err
		}); len(got) != 2 {
			t.Errorf("a song's hook saw %v, want the song and its first revision", got)
		}
		if got := made(func(ctx context.Context) error {
			_, err := f.store.CreateRevision(ctx, ann, song.ID, "", "v2")
			return err
		}); len(got) != 1 {
			t.Errorf("a revision's hook saw %v, want it", got)
		}
		if got := made(func(ctx context.Context) error {
			_, err := f.store.CreateComment(ctx, ann, song.ID, "c")
			return err
		}); len(got) != 1 {
			t.Errorf("a comment's hook saw %v, want it", got)
		} else if c, ok := got[0].(models.Comment); !ok || c.ID == 0 || c.Body != "c" {
			t.Errorf("a comment's hook saw %+v, want the comment with its id", got[0])
		}
		if got := made(func(ctx context.Context) error {
			_, err := f.store.CreatePitch(ctx, ann, "p")
			return err
		}); len(got) != 1 {
			t.Errorf("a pitch's hook saw %v, want it", got)
		}
	})
}

// Deleting a song changes the views of those who commented on it (their comments go with it),
// not only the author's: their kept versions move and they are told.
func TestDeletingASongChangesItsCommentersViews(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		told := f.listen()
		ann, bob := f.User("ann"), f.User("bob")
		song := f.publicSong(ann, "S", nil)
		if _, err := f.store.CreateComment(f.ctx, bob, song, "nice"); err != nil {
			t.Fatal(err)
		}
		before := f.mineVersion(bob)
		told.reset()
		if err := f.store.DeleteItem(f.ctx, ann, "song", song); err != nil {
			t.Fatal(err)
		}
		if after := f.mineVersion(bob); after.Version == before.Version {
			t.Errorf("bob's version stayed %d after the song he commented on was deleted", after.Version)
		}
		if ids := told.ids(); !slices.Contains(ids, bob) || !slices.Contains(ids, ann) {
			t.Errorf("told of %v, want ann (%d) and bob (%d)", ids, ann, bob)
		}
	})
}

// listen makes the store tell a new toldChanges of every change, and returns it.
func (f *fixture) listen() *toldChanges {
	told := &toldChanges{}
	f.store.SetChanges(told)
	return told
}

// toldChanges is a models.Changes that keeps whom it was told of.
type toldChanges struct {
	mu   sync.Mutex
	told []int64
	all  bool
}

func (c *toldChanges) Changed(ids ...int64) {
	c.mu.Lock()
	c.told = append(c.told, ids...)
	c.mu.Unlock()
}

func (c *toldChanges) WakeAll() {
	c.mu.Lock()
	c.all = true
	c.mu.Unlock()
}

func (c *toldChanges) reset() {
	c.mu.Lock()
	c.told, c.all = nil, false
	c.mu.Unlock()
}

func (c *toldChanges) allTold() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.all
}

func (c *toldChanges) ids() []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.told)
}

// A retry that made jobs due tells their author's view, or every view when it was not one
// author's; a retry that made nothing due tells nobody.
func TestRetryTellsTheViewsItChanged(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		told := f.listen()
		ann := f.User("ann")
		f.bulkPitches(ann, 2)
		jobs, err := f.store.ClaimDue(f.ctx, 2, lease, "w", ann)
		if err != nil || len(jobs) != 2 {
			t.Fatalf("claim: %d %v", len(jobs), err)
		}
		for _, j := range jobs {
			if ok, err := f.store.Reschedule(f.ctx, j, f.clk.Now().Add(time.Hour), models.WhyUpstream, nil, models.Event{Event: "screen", Kind: j.Kind, ItemID: j.ItemID, UserID: ann, Outcome: "pending"}); err != nil || !ok {
				t.Fatalf("reschedule: %v %v", ok, err)
			}
		}
		told.reset()
		if n, err := f.store.RetryJobs(f.ctx, models.JobFilter{UserID: ann}); err != nil || n != 2 {
			t.Fatalf("retry: %d %v", n, err)
		}
		if ids, all := told.ids(), told.allTold(); !slices.Equal(ids, []int64{ann}) || all {
			t.Errorf("an author's retry told %v (all: %v), want only ann", ids, all)
		}
		told.reset()
		if n, err := f.store.RetryJobs(f.ctx, models.JobFilter{UserID: f.User("bob")}); err != nil || n != 0 {
			t.Fatalf("a retry of bob's (none): %d %v", n, err)
		}
		if ids, all := told.ids(), told.allTold(); len(ids) != 0 || all {
			t.Errorf("a retry that made nothing due told %v (all: %v), want nobody", ids, all)
		}
		for _, j := range jobs {
			f.Exec(`UPDATE content_jobs SET due_at = ? WHERE id = ?`, f.clk.Now().Add(time.Hour).UnixMilli(), j.ID)
		}
		told.reset()
		if n, err := f.store.RetryJobs(f.ctx, models.JobFilter{}); err != nil || n != 2 {
			t.Fatalf("retry of everyone's: %d %v", n, err)
		}
		if all := told.allTold(); !all {
			t.Error("a retry of everyone's jobs did not tell every view")
		}
	})
}
