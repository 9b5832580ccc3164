package migrations_test

import (
	"context"
	"testing"

	"github.com/owed/owed/migrations"
)

// TestMineRowsStartFromTheTables: migration 0026 (SQLite) fills mine_rows from a database an
// older owed made, with exactly the rows a fresh join of the items, their verdicts and their
// scores gives: every kind, pending and screened items, a scored revision, equal times, and a
// verdict left behind by an item that is gone.
func TestMineRowsStartFromTheTables(t *testing.T) {
	ctx := context.Background()
	list, err := migrations.List("sqlite")
	if err != nil {
		t.Fatal(err)
	}
	var before []migrations.Migration
	var versions []int
	for _, m := range list {
		if m.Version < 26 {
			before = append(before, m)
			versions = append(versions, m.Version)
		}
	}
	old := fresh(t, "sqlite")
	applyAs(t, old.db, "sqlite", before, versions)
	for _, q := range []string{
		`INSERT INTO users (id, name, role, token_hash) VALUES (1, 'ann', 'author', 'a'), (2, 'bob', 'author', 'b')`,
		`INSERT INTO songs (id, user_id, title) VALUES (1, 1, 'S')`,
		`INSERT INTO revisions (id, song_id, user_id, title, code, created_at) VALUES (1, 1, 1, 'v1', 'c', 1000), (2, 1, 1, 'v2', 'c', 2000)`,
		`INSERT INTO comments (id, song_id, user_id, body, created_at) VALUES (1, 1, 2, 'hi', 2000), (2, 1, 1, 'me', 3000)`,
		`INSERT INTO pitches (id, user_id, body, created_at) VALUES (1, 1, 'p', 2000), (2, 2, 'q', 4000)`,
		`INSERT INTO screens (kind, item_id, verdict, confidence) VALUES ('revision', 1, 'allow', 0.9), ('comment', 1, 'block', 0.4),
			('pitch', 2, 'allow', 0.7), ('pitch', 99, 'block', 0.1)`,
		`INSERT INTO scores (revision_id, song_id, art, art_runs, criteria, model, rubric) VALUES (1, 1, 0.5, '[0.4,0.5,0.6]', '{"x":1}', 'critic', 'v1')`,
	} {
		if _, err := old.db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if _, err := migrations.Apply(ctx, old.db, "sqlite"); err != nil {
		t.Fatal(err)
	}
	kept := dumpRows(t, old.db, `SELECT user_id, created_at, kind_order, id, COALESCE(song_id, ''), COALESCE(title, ''),
		COALESCE(verdict, ''), COALESCE(confidence, ''), COALESCE(art, ''), COALESCE(art_runs, ''), COALESCE(criteria, ''),
		COALESCE(model, ''), COALESCE(rubric, '') FROM mine_rows ORDER BY user_id, created_at, kind_order, id`)
	want := "1 | 1000 | 2 | 1 | 1 | v1 | allow | 0.9 | 0.5 | [0.4,0.5,0.6] | {\"x\":1} | critic | v1\n" +
		"1 | 2000 | 0 | 1 |  |  |  |  |  |  |  |  | \n" +
		"1 | 2000 | 2 | 2 | 1 | v2 |  |  |  |  |  |  | \n" +
		"1 | 3000 | 1 | 2 | 1 |  |  |  |  |  |  |  | \n" +
		"2 | 2000 | 1 | 1 | 1 |  | block | 0.4 |  |  |  |  | \n" +
		"2 | 4000 | 0 | 2 |  |  | allow | 0.7 |  |  |  |  | \n"
	if kept != want {
		t.Fatalf("mine_rows after 0026:\n%s\nwant\n%s", kept, want)
	}
}
