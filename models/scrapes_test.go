package models_test

import (
	"testing"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// A scrape's delete finishes once its last media row is gone, and says so once: not while
// rows are left, nor for a scrape already deleted.
func TestFinishScrapeDeleteOnlyOnceItsRowsAreGone(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, url string) {
		f := newFixture(t, url)
		sc, err := f.store.CreateScrape(f.ctx, models.NewScrape{ChatID: "chat-d", Backend: "puppet", Mode: "full"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.store.AddMedia(f.ctx, sc.ID, []models.NewMedia{{Kind: models.MediaImage, URL: "https://cdn.test/a.png"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.store.RequestScrapeDelete(f.ctx, sc.ID); err != nil {
			t.Fatal(err)
		}
		if err := f.store.MarkScrapeDeleting(f.ctx, sc.ID); err != nil {
			t.Fatal(err)
		}
		finish := func(want bool, when string) {
			t.Helper()
			if done, err := f.store.FinishScrapeDelete(f.ctx, sc.ID); err != nil || done != want {
				t.Errorf("%s: done %v (err %v), want %v", when, done, err, want)
			}
		}
		finish(false, "a media row left")
		ids, err := f.store.MediaIDsOf(f.ctx, sc.ID, 10)
		if err != nil || len(ids) != 1 {
			t.Fatalf("media ids %v, err %v", ids, err)
		}
		if err := f.store.DeleteMedia(f.ctx, ids); err != nil {
			t.Fatal(err)
		}
		finish(true, "every row gone")
		finish(false, "already deleted")
	})
}
