package migrations_test

import (
	"context"
	"database/sql"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/owed/owed/migrations"
)

// TestRawSQLFromTheSQLiteCLI: any writer keeps the owed work right, even raw SQL from the
// sqlite3 command of the system, whatever its version (3.40 on Debian 12, older than the
// SQLite owed is built with): items written without their times owe their screens, a verdict
// written without its time settles the screen and owes the score, and a score settles that.
// Skipped where no sqlite3 command is installed.
func TestRawSQLFromTheSQLiteCLI(t *testing.T) {
	cli, err := exec.LookPath("sqlite3")
	if err != nil {
		t.Skip("no sqlite3 command installed")
	}
	version, _ := exec.Command(cli, "--version").Output()
	t.Logf("sqlite3 %s", strings.Fields(string(version) + " ?")[0])
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "owed.db")
	db, err := sql.Open("sqlite3", "file:"+path+"?_foreign_keys=on")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := migrations.Apply(ctx, db, "sqlite"); err != nil {
		t.Fatal(err)
	}
	var schema string
	if err := db.QueryRow(`SELECT group_concat(sql, ';') FROM sqlite_master`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(schema, "unixepoch") {
		t.Error("the schema still uses unixepoch (SQLite 3.38+; 'subsec' 3.42+)")
	}

	sqlite := func(script string) string {
		t.Helper()
		out, err := exec.Command(cli, path, "PRAGMA foreign_keys = ON; "+script).CombinedOutput()
		if err != nil {
			t.Fatalf("sqlite3: %v\n%s\nscript: %s", err, out, script)
		}
		return strings.TrimSpace(string(out))
	}
	before := time.Now().UnixMilli()
	sqlite(`INSERT INTO users (name, role, token_hash) VALUES ('ann', 'author', 'h1');
		INSERT INTO songs (user_id, title) VALUES (1, 'Tide');
		INSERT INTO revisions (song_id, user_id, title, code) VALUES (1, 1, 'Tide', 's("bd")');
		INSERT INTO comments (song_id, user_id, body) VALUES (1, 1, 'nice');
		INSERT INTO pitches (user_id, body) VALUES (1, 'hear me');`)
	after := time.Now().UnixMilli()

	jobs := func() map[string]int64 {
		t.Helper()
		rows, err := db.Query(`SELECT j.task || ' ' || j.kind, j.due_at, j.created_at,
				COALESCE(r.created_at, c.created_at, p.created_at, j.due_at)
			FROM content_jobs j
			LEFT JOIN revisions r ON j.kind = 'revision' AND r.id = j.item_id
			LEFT JOIN comments c ON j.kind = 'comment' AND c.id = j.item_id
			LEFT JOIN pitches p ON j.kind = 'pitch' AND p.id = j.item_id`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[string]int64{}
		for rows.Next() {
			var name string
			var due, created, itemCreated int64
			if err := rows.Scan(&name, &due, &created, &itemCreated); err != nil {
				t.Fatal(err)
			}
			if created < before || created > time.Now().UnixMilli() {
				t.Errorf("%s job made at %d, want a time in milliseconds since %d", name, created, before)
			}
			if strings.HasPrefix(name, "screen") && due != itemCreated {
				t.Errorf("%s job due %d, want its item's created_at %d", name, due, itemCreated)
			}
			out[name] = due
		}
		return out
	}
	j := jobs()
	if len(j) != 3 || j["screen revision"] == 0 || j["screen comment"] == 0 || j["screen pitch"] == 0 {
		t.Fatalf("jobs after raw inserts = %v, want a screen of the revision, the comment and the pitch", j)
	}
	for name, due := range j {
		if due < before || due > after {
			t.Errorf("%s due %d, want the time it was written (%d..%d)", name, due, before, after)
		}
	}

	// A verdict and a score written by hand, their times left to the database.
	sqlite(`INSERT INTO screens (kind, item_id, verdict, confidence) VALUES ('revision', 1, 'allow', 0.9)`)
	if j := jobs(); len(j) != 3 || j["score revision"] == 0 || j["screen revision"] != 0 {
		t.Fatalf("jobs after a raw verdict = %v, want the revision's screen settled and its score owed", j)
	}
	if got := sqlite(`SELECT public FROM songs WHERE id = 1`); got != "1" {
		t.Errorf("song public = %s after an allow, want 1", got)
	}
	sqlite(`INSERT INTO scores (revision_id, song_id, art, art_runs, criteria, model, rubric)
		VALUES (1, 1, 0.4, '[0.1,0.2,0.9]', '{}', 'critic', 'art-v1')`)
	if j := jobs(); len(j) != 2 || j["score revision"] != 0 {
		t.Fatalf("jobs after a raw score = %v, want the score settled", j)
	}
	if got := sqlite(`SELECT art FROM songs WHERE id = 1`); got != "0.4" {
		t.Errorf("song art = %s after a raw score, want 0.4", got)
	}
}
