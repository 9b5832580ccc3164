package models_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// A scrape's delete finishes once its last media row is gone, and says so once: not while
// rows are left, nor for a scrape already deleted.
func TestFinishScrapeDeleteOnlyOnceItsRowsAreGone(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, url string) {
		f := newFixture(t, url)
		sc := f.scrape("chat-d")
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

// A push of media rows is written in statements of 500 rows at most: every row of a push of
// exactly one chunk, and of one more than a chunk, is added.
func TestAddMediaWritesEveryChunk(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, url string) {
		f := newFixture(t, url)
		for _, n := range []int{500, 501} {
			sc := f.scrape(fmt.Sprint("chat-", n))
			items := make([]models.NewMedia, n)
			for i := range items {
				items[i] = models.NewMedia{Kind: models.MediaImage, URL: fmt.Sprintf("https://cdn.test/%d/%d.png", n, i)}
			}
			if added, err := f.store.AddMedia(f.ctx, sc.ID, items); err != nil || added != n {
				t.Fatalf("add %d media: added %d, err %v", n, added, err)
			}
			if got := f.Count(`SELECT COUNT(*) FROM media WHERE scrape_id = ?`, sc.ID); got != int64(n) {
				t.Errorf("a push of %d media wrote %d rows", n, got)
			}
		}
	})
}

// A scrape going back to active restarts its walk, which holds the walk lock from its last
// push: its pushed time is now. Any other change, and active to active, leaves that time.
func TestScrapeBackToActiveRestartsItsWalk(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, url string) {
		f := newFixture(t, url)
		sc := f.scrape("chat-p")
		pushed := sc.PushedAt
		for _, c := range []struct {
			to      models.ScrapeState
			restart bool
		}{{models.ScrapePaused, false}, {models.ScrapeActive, true}, {models.ScrapeActive, false}, {models.ScrapeDone, false}} {
			f.clk.Advance(time.Minute)
			got, err := f.store.UpdateScrape(f.ctx, sc.ID, &c.to, nil)
			if err != nil {
				t.Fatal(err)
			}
			if c.restart {
				pushed = f.clk.Now()
			}
			if !got.PushedAt.Equal(pushed) {
				t.Errorf("to %s: pushed at %v, want %v", c.to, got.PushedAt, pushed)
			}
		}
	})
}

// scrape records a new, active scrape of chat.
func (f *fixture) scrape(chat string) models.Scrape {
	f.t.Helper()
	sc, err := f.store.CreateScrape(f.ctx, models.NewScrape{ChatID: chat, Backend: "puppet", Mode: "full"})
	if err != nil {
		f.t.Fatalf("create a scrape of %s: %v", chat, err)
	}
	return sc
}
