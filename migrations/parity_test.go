package migrations_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/owed/owed/migrations"
	"github.com/owed/owed/owedtest"
)

// intendedDifferences are the lines of the schema's shape (shape) one dialect has and the
// other has not, on purpose, each with why. Anything else that differs is a migration that
// forgot its other dialect.
//
// What shape leaves out, because the dialects differ there on purpose:
//   - column types: SQLite's INTEGER and TEXT are PostgreSQL's bigint, integer and text (every
//     time is integer milliseconds on both; models reads both alike);
//   - the triggers' bodies: SQLite's are statements in the trigger, PostgreSQL's are PL/pgSQL
//     functions (the triggers' effects are tested through the store on both dialects);
//   - a primary key's index: SQLite's INTEGER PRIMARY KEY is the rowid and has none;
//   - storage options: PostgreSQL keeps 30% of content_jobs' pages free (fillfactor), for
//     HOT updates of the lease; SQLite has no such setting;
//   - CHECK constraints' text, which each dialect prints its own way (their effect on why is
//     held to models.Whys by TestStoredWhysMatchTheCheck).
//   - whether an index's trailing columns are keys or only carried: PostgreSQL's covering
//     columns (INCLUDE) are SQLite's trailing key columns (SQLite has no INCLUDE), so shape
//     lists both as the index's columns.
//
// A "table T" entry stands for the table and every column and index of it.
var intendedDifferences = map[string]string{
	"index screens.screens_verdict (kind, item_id, verdict, confidence, public_reason)": "SQLite only: a page of the author's view reads its verdicts from " +
		"this index alone, since each item's verdict is otherwise a random page of a file larger than " +
		"the cache; on PostgreSQL it would add a write to every recording statement, the queue core's " +
		"bottleneck there, and the view reads the rows from shared buffers",
}

// intendedDifference is the entry of intendedDifferences that covers line l, if any.
func intendedDifference(l string) (string, bool) {
	if _, ok := intendedDifferences[l]; ok {
		return l, true
	}
	for _, prefix := range []string{"column ", "index "} {
		if rest, ok := strings.CutPrefix(l, prefix); ok {
			table, _, _ := strings.Cut(rest, ".")
			if _, ok := intendedDifferences["table "+table]; ok {
				return "table " + table, true
			}
		}
	}
	return "", false
}

// TestBothDialectsMigrateToOneSchema: a database migrated on SQLite and one migrated on
// PostgreSQL have the same tables, the same columns (and which may be null) and the same
// indexes (their tables, columns, order and uniqueness), but for intendedDifferences.
func TestBothDialectsMigrateToOneSchema(t *testing.T) {
	if os.Getenv(owedtest.PostgresEnv) == "" {
		t.Skip("needs PostgreSQL: set " + owedtest.PostgresEnv)
	}
	ctx := context.Background()
	shapes := map[string][]string{}
	for _, dialect := range []string{"sqlite", "postgres"} {
		d := fresh(t, dialect)
		if _, err := migrations.Apply(ctx, d.db, dialect); err != nil {
			t.Fatalf("%s: %v", dialect, err)
		}
		shapes[dialect] = shape(t, d, dialect)
	}
	lite, pg := shapes["sqlite"], shapes["postgres"]
	if !slices.Contains(lite, "table content_jobs") || !slices.Contains(lite, "column content_jobs.task not null") {
		t.Fatalf("the SQLite shape misses content_jobs:\n%s", strings.Join(lite, "\n"))
	}
	used := map[string]bool{}
	for _, side := range []struct {
		name        string
		have, other []string
	}{{"sqlite", lite, pg}, {"postgres", pg, lite}} {
		for _, l := range side.have {
			if slices.Contains(side.other, l) {
				continue
			}
			if key, ok := intendedDifference(l); ok {
				used[key] = true
				continue
			}
			t.Errorf("only %s has: %s", side.name, l)
		}
	}
	for l := range intendedDifferences {
		if !used[l] {
			t.Errorf("an intended difference no longer differs (remove it from the list): %s", l)
		}
	}
}

// shape is a migrated database's tables, columns and indexes as lines both dialects write
// alike: "table T", "column T.C [not null]", "index T.I (C, …) [unique] [partial]" where an
// expression in an index is "(expr)". An index a UNIQUE constraint makes by itself is named
// "(unique constraint)" (SQLite's sqlite_autoindex_* and PostgreSQL's *_key are named their
// own way); a primary key's is left out (SQLite's INTEGER PRIMARY KEY is the rowid, no index).
func shape(t *testing.T, d database, dialect string) []string {
	t.Helper()
	var q string
	if dialect == "sqlite" {
		q = `SELECT 'table ' || name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'
			UNION ALL
			SELECT 'column ' || m.name || '.' || c.name || CASE WHEN c."notnull" = 1 OR c.pk > 0 THEN ' not null' ELSE '' END
			FROM sqlite_master m, pragma_table_info(m.name) c WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%'
			UNION ALL
			SELECT 'index ' || m.name || '.' || CASE WHEN il.origin = 'u' THEN '(unique constraint)' ELSE il.name END || ' (' ||
				(SELECT group_concat(COALESCE(ii.name, '(expr)'), ', ') FROM (SELECT * FROM pragma_index_xinfo(il.name) WHERE key = 1 ORDER BY seqno) ii)
				|| ')' || CASE WHEN il."unique" = 1 THEN ' unique' ELSE '' END || CASE WHEN il.partial = 1 THEN ' partial' ELSE '' END
			FROM sqlite_master m, pragma_index_list(m.name) il
			WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%' AND il.origin <> 'pk'`
	} else {
		q = `SELECT 'table ' || table_name FROM information_schema.tables
				WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'
			UNION ALL
			SELECT 'column ' || table_name || '.' || column_name || CASE WHEN is_nullable = 'NO' THEN ' not null' ELSE '' END
			FROM information_schema.columns c WHERE table_schema = current_schema()
				AND EXISTS (SELECT 1 FROM information_schema.tables tt WHERE tt.table_schema = c.table_schema
					AND tt.table_name = c.table_name AND tt.table_type = 'BASE TABLE')
			UNION ALL
			SELECT 'index ' || t.relname || '.' ||
				CASE WHEN EXISTS (SELECT 1 FROM pg_constraint con WHERE con.conindid = i.indexrelid AND con.contype = 'u')
					THEN '(unique constraint)' ELSE ic.relname END || ' (' ||
				(SELECT string_agg(COALESCE(a.attname, '(expr)'), ', ' ORDER BY k.n)
					FROM unnest(i.indkey[0:i.indnatts - 1]) WITH ORDINALITY AS k(attnum, n)
					LEFT JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum AND k.attnum > 0)
				|| ')' || CASE WHEN i.indisunique THEN ' unique' ELSE '' END || CASE WHEN i.indpred IS NOT NULL THEN ' partial' ELSE '' END
			FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid JOIN pg_class t ON t.oid = i.indrelid
			JOIN pg_namespace n ON n.oid = t.relnamespace
			WHERE n.nspname = current_schema() AND NOT EXISTS (SELECT 1 FROM pg_constraint con WHERE con.conindid = i.indexrelid AND con.contype = 'p')`
	}
	rows, err := d.db.Query(q)
	if err != nil {
		t.Fatalf("%s shape: %v", dialect, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var l string
		if err := rows.Scan(&l); err != nil {
			t.Fatal(err)
		}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}
