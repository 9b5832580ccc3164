package models_test

import (
	"testing"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// The why values have one home (models.Whys): the migrated CHECK on content_jobs.why takes
// exactly the ones a row keeps, on both dialects.
func TestStoredWhysMatchTheCheck(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		ann := f.User("ann")
		for i, why := range models.Whys {
			_, err := f.store.RawExec(f.ctx, `INSERT INTO content_jobs (task, kind, item_id, user_id, due_at, created_at, why)
				VALUES ('screen', 'pitch', ?, ?, ?, ?, ?)`, 5000+i, ann, f.NowMs(), f.NowMs(), why)
			if why.Stored() && err != nil {
				t.Errorf("why %q is stored, but the database refuses it: %v", why, err)
			}
			if !why.Stored() && err == nil {
				t.Errorf("why %q is only shown, but the database takes it", why)
			}
		}
	})
}
