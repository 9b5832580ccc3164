package api_test

import (
	"net/http"
	"testing"

	"github.com/owed/owed/owedtest"
)

func TestPublishScreensInlineAndScoresInBackground(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		env := owedtest.NewEnv(t, db)
		_, tok := env.User("ann", "author")
		r := env.Do(http.MethodPost, "/api/listeners/songs", tok, map[string]string{"title": "Tide", "code": `s("bd sd")`})
		if r.Status != http.StatusCreated {
			t.Fatalf("publish: %d %s", r.Status, r.Body)
		}
		var got struct {
			Song   struct{ ID int64 }
			Screen struct {
				State   string
				Verdict *string
			}
		}
		r.Decode(t, &got)
		if got.Screen.State != "public" || got.Screen.Verdict == nil || *got.Screen.Verdict != "allow" {
			t.Fatalf("screen = %+v, want public/allow: %s", got.Screen, r.Body)
		}
		env.Sweep() // the score follows in the background; a sweep settles whatever is left
		env.App.Content.Stop(t.Context())
		songs := env.Do(http.MethodGet, "/api/songs", "", nil).JSON()["songs"].([]any)
		if len(songs) != 1 || songs[0].(map[string]any)["art"] == nil {
			t.Fatalf("songs = %v, want one scored song", songs)
		}
	})
}
