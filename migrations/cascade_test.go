package migrations_test

import (
	"context"
	"database/sql"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/owed/owed/migrations"
)

// TestDeletesWithForeignKeysOff: a writer with foreign keys off — the sqlite3 shell's default,
// and SQLite's own, shown here by asking each writer — that deletes a song, then a user, then
// a scrape and a webhook, leaves no child behind (PRAGMA foreign_key_check finds no orphan)
// and no owed work for an item that is gone: the cascades are triggers too (0030). Each writer
// runs against its own database: the sqlite3 command (skipped where none is installed), and
// a connection of the driver opened without options.
func TestDeletesWithForeignKeysOff(t *testing.T) {
	t.Parallel()
	type writer func(t *testing.T, path, script string) string
	writers := map[string]writer{
		"sqlite3 shell": func(t *testing.T, path, script string) string {
			cli, err := exec.LookPath("sqlite3")
			if err != nil {
				t.Skip("no sqlite3 command installed")
			}
			out, err := exec.Command(cli, path, script).CombinedOutput()
			if err != nil {
				t.Fatalf("sqlite3: %v\n%s\nscript: %s", err, out, script)
			}
			return strings.TrimSpace(string(out))
		},
		"driver without options": func(t *testing.T, path, script string) string {
			db, err := sql.Open("sqlite3", "file:"+path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			db.SetMaxOpenConns(1)
			if strings.HasPrefix(script, "PRAGMA foreign_keys;") {
				var on string
				if err := db.QueryRow(`PRAGMA foreign_keys`).Scan(&on); err != nil {
					t.Fatal(err)
				}
				return on
			}
			if _, err := db.Exec(script); err != nil {
				t.Fatalf("script: %v\n%s", err, script)
			}
			return ""
		},
	}
	t.Run("every cascade is a trigger too", func(t *testing.T) {
		t.Parallel()
		db, err := sql.Open("sqlite3", "file:"+filepath.Join(t.TempDir(), "owed.db")+"?_foreign_keys=on")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := migrations.Apply(context.Background(), db, "sqlite"); err != nil {
			t.Fatal(err)
		}
		rows, err := db.Query(`SELECT m.name, f."table", f."from", f."to" FROM sqlite_schema m, pragma_foreign_key_list(m.name) f
			WHERE m.type = 'table' AND f.on_delete = 'CASCADE'`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		n := 0
		for rows.Next() {
			var child, parent, from, to string
			if err := rows.Scan(&child, &parent, &from, &to); err != nil {
				t.Fatal(err)
			}
			n++
			var found int
			stmt := "DELETE FROM " + child + " WHERE " + from + " = OLD." + to + ";"
			if err := db.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE type = 'trigger' AND tbl_name = ?
				AND sql LIKE '%AFTER DELETE ON ' || ? || ' %' AND instr(sql, ?) > 0`, parent, parent, stmt).Scan(&found); err != nil {
				t.Fatal(err)
			}
			if found == 0 {
				t.Errorf("%s.%s cascades from %s, and no delete trigger on %s says %q", child, from, parent, parent, stmt)
			}
		}
		if n < 14 {
			t.Errorf("%d cascading foreign keys found, want the schema's 14 at least", n)
		}
	})
	for name, write := range writers {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
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
			if on := write(t, path, "PRAGMA foreign_keys;"); on != "0" {
				t.Fatalf("PRAGMA foreign_keys = %q for this writer; the test is of a writer with them off", on)
			}
			count := func(q string) int64 {
				t.Helper()
				var n int64
				if err := db.QueryRow(q).Scan(&n); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
				return n
			}
			orphans := func(after string) {
				t.Helper()
				rows, err := db.Query(`PRAGMA foreign_key_check`)
				if err != nil {
					t.Fatal(err)
				}
				defer rows.Close()
				var left []string
				for rows.Next() {
					var table, parent string
					var rowid, fk sql.NullInt64
					if err := rows.Scan(&table, &rowid, &parent, &fk); err != nil {
						t.Fatal(err)
					}
					left = append(left, table+" → "+parent)
				}
				if len(left) != 0 {
					t.Errorf("after %s, rows whose parent is gone: %v", after, left)
				}
				// Owed work of an item that is gone (items are not foreign keys of the jobs).
				if n := count(`SELECT count(*) FROM content_jobs j WHERE NOT EXISTS (
						SELECT 1 FROM revisions r WHERE j.kind = 'revision' AND r.id = j.item_id
						UNION ALL SELECT 1 FROM comments c WHERE j.kind = 'comment' AND c.id = j.item_id
						UNION ALL SELECT 1 FROM pitches p WHERE j.kind = 'pitch' AND p.id = j.item_id)`); n != 0 {
					t.Errorf("after %s, %d content jobs of items that are gone", after, n)
				}
			}

			write(t, path, `INSERT INTO users (name, role, token_hash) VALUES ('ann', 'author', 'h1'), ('bob', 'author', 'h2');
				INSERT INTO songs (user_id, title) VALUES (1, 'Tide'), (1, 'Ebb'), (2, 'Bob''s');
				INSERT INTO revisions (song_id, user_id, title, code) VALUES (1, 1, 'Tide', 'a'), (1, 1, 'Tide', 'b'), (2, 1, 'Ebb', 'c'), (3, 2, 'Bob''s', 'd');
				INSERT INTO screens (kind, item_id, verdict, confidence) VALUES ('revision', 2, 'allow', 0.9);
				INSERT INTO scores (revision_id, song_id, art, art_runs, criteria, model, rubric) VALUES (2, 1, 0.4, '[0.4,0.4,0.4]', '{}', 'critic', 'art-v1');
				INSERT INTO revisions (song_id, user_id, title, code) VALUES (1, 1, 'Tide', 'e');
				INSERT INTO comments (song_id, user_id, body) VALUES (1, 2, 'bob on ann''s'), (3, 1, 'ann on bob''s');
				INSERT INTO pitches (user_id, body) VALUES (1, 'ann''s'), (2, 'bob''s');`)
			if n := count(`SELECT count(*) FROM content_jobs`); n != 8 {
				t.Fatalf("%d jobs owed, want 8: a screen of each revision but the allowed (and scored) one, of each comment and of each pitch", n)
			}

			write(t, path, `DELETE FROM songs WHERE id = 1`)
			orphans(`deleting a song`)
			if n := count(`SELECT count(*) FROM revisions WHERE song_id = 1`) + count(`SELECT count(*) FROM comments WHERE song_id = 1`) +
				count(`SELECT count(*) FROM scores WHERE song_id = 1`); n != 0 {
				t.Errorf("%d revisions, comments and scores of the deleted song left", n)
			}

			write(t, path, `DELETE FROM users WHERE name = 'ann'`)
			orphans(`deleting a user`)
			if n := count(`SELECT count(*) FROM content_jobs`); n != 2 {
				t.Errorf("%d jobs owed after ann's delete, want bob's revision and pitch", n)
			}

			write(t, path, `INSERT INTO scrapes (chat_id, backend, mode, state, pushed_at, created_at, updated_at) VALUES ('c', 'puppet', 'm', 'done', 0, 0, 0);
				INSERT INTO media (scrape_id, kind, url, updated_at) VALUES (1, 'image', 'https://cdn.example/1.png', 0), (1, 'image', 'https://cdn.example/2.png', 0);
				INSERT INTO webhooks (url, events, secret, created_at) VALUES ('https://hooks.example/', '["*"]', 's', 0);
				INSERT INTO webhook_deliveries (webhook_id, msg_id, event, payload, due_at, created_at) VALUES (1, 'm1', 'e', '{}', 0, 0);
				INSERT INTO webhook_attempts (delivery_id, attempt, at, latency_ms) VALUES (1, 1, 0, 5);
				DELETE FROM scrapes WHERE id = 1;
				DELETE FROM webhooks WHERE id = 1;`)
			orphans(`deleting a scrape and a webhook`)
		})
	}
}
