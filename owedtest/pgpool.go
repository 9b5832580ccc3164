package owedtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/binary"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest/clocktest"
)

// Migrating a PostgreSQL schema takes most of a second (a second and more on a loaded machine),
// once per test and dialect. The pool migrates a schema once and hands it to test after test:
// when a test ends its schema is emptied back to what the migrations left (the seed rows, the
// sequences where they stood) and goes back to the pool, unless the test changed its tables,
// indexes, triggers or functions (a fault test renames or drops a table), which drops it.
//
// Pool schemas are named owedtest_pool_<process key>_<n>. A process holds an advisory lock on
// its key for as long as it runs; the first process to use a pool drops every pool schema whose
// key nobody holds (left by a test binary that was killed).

// poolLockClass is the advisory lock class of the pool's process keys.
const poolLockClass = 827_301

// pgPool is one process's pool of migrated schemas on one server.
type pgPool struct {
	base string
	db   *sql.DB
	key  int32

	mu      sync.Mutex
	free    []*pooled
	made    int
	initErr error
}

// pooled is a migrated schema and what a reset brings it back to.
type pooled struct {
	name        string
	fingerprint string
	tables      []string
	seeded      map[string]string // table → its insertable columns, for tables the migrations seeded
	sequences   []sequenceAt
}

type sequenceAt struct {
	name   string
	value  int64
	called bool
}

var (
	poolsMu sync.Mutex
	pools   = map[string]*pgPool{}
)

func poolFor(base string) (*pgPool, error) {
	poolsMu.Lock()
	defer poolsMu.Unlock()
	if p := pools[base]; p != nil {
		return p, p.initErr
	}
	p := &pgPool{base: base}
	pools[base] = p
	p.initErr = p.init()
	return p, p.initErr
}

// init takes the process's key (locked on a connection of its own for the process's life) and
// drops the pool schemas of processes that are gone.
func (p *pgPool) init() error {
	db, err := sql.Open("pgx", p.base)
	if err != nil {
		return err
	}
	db.SetMaxOpenConns(4)
	p.db = db
	ctx := context.Background()
	var b [4]byte
	rand.Read(b[:])
	p.key = int32(binary.BigEndian.Uint32(b[:]) & 0x7fffffff)
	holder, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	if _, err := holder.ExecContext(ctx, `SELECT pg_advisory_lock($1, $2)`, poolLockClass, p.key); err != nil {
		return fmt.Errorf("lock the pool's key: %w", err)
	}
	// holder stays open (and the key locked) until the process ends.
	rows, err := db.QueryContext(ctx, `SELECT nspname FROM pg_namespace WHERE nspname LIKE 'owedtest\_pool\_%'`)
	if err != nil {
		return err
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return err
		}
		names = append(names, n)
	}
	rows.Close()
	keyOf := regexp.MustCompile(`^owedtest_pool_(\d+)_`)
	for _, n := range names {
		m := keyOf.FindStringSubmatch(n)
		if m == nil {
			continue
		}
		k, err := strconv.ParseInt(m[1], 10, 32)
		if err != nil || int32(k) == p.key {
			continue
		}
		var gone bool
		if err := db.QueryRowContext(ctx, `SELECT pg_try_advisory_lock($1, $2)`, poolLockClass, k).Scan(&gone); err != nil || !gone {
			continue
		}
		db.ExecContext(ctx, `DROP SCHEMA IF EXISTS `+n+` CASCADE`)
		db.ExecContext(ctx, `SELECT pg_advisory_unlock($1, $2)`, poolLockClass, k)
	}
	return nil
}

// take gives a migrated schema: a free one, or a new one migrated now.
func (p *pgPool) take(t testing.TB) *pooled {
	p.mu.Lock()
	if n := len(p.free); n > 0 {
		s := p.free[n-1]
		p.free = p.free[:n-1]
		p.mu.Unlock()
		return s
	}
	p.made++
	name := fmt.Sprintf("owedtest_pool_%d_%d", p.key, p.made)
	p.mu.Unlock()
	ctx := context.Background()
	if _, err := p.db.ExecContext(ctx, `CREATE SCHEMA `+name); err != nil {
		t.Fatalf("postgres: create schema: %v", err)
	}
	// Migrate it as a test would, through models.Open.
	store, err := models.Open(ctx, models.Options{URL: schemaURL(t, p.base, name), DataDir: t.TempDir(), Clock: clocktest.NewFake(Start), MaxConns: 2})
	if err != nil {
		t.Fatalf("postgres: migrate pool schema: %v", err)
	}
	store.Close()
	s := &pooled{name: name, seeded: map[string]string{}}
	if err := p.snapshot(ctx, s); err != nil {
		t.Fatalf("postgres: snapshot pool schema: %v", err)
	}
	return s
}

// give takes s back after a test: emptied to its snapshot, or dropped when the test changed it.
func (p *pgPool) give(s *pooled) {
	ctx := context.Background()
	fp, err := p.fingerprint(ctx, s.name)
	if err == nil && fp == s.fingerprint {
		err = p.reset(ctx, s)
	} else if err == nil {
		err = fmt.Errorf("changed by the test")
	}
	if err != nil {
		p.db.ExecContext(ctx, `DROP SCHEMA IF EXISTS `+s.name+` CASCADE`)
		p.db.ExecContext(ctx, `DROP SCHEMA IF EXISTS `+s.name+`_seed CASCADE`)
		return
	}
	p.mu.Lock()
	p.free = append(p.free, s)
	p.mu.Unlock()
}

// snapshot records what a freshly migrated schema holds: its catalog's fingerprint, its tables,
// a copy of the rows the migrations seeded (in <name>_seed) and its sequences.
func (p *pgPool) snapshot(ctx context.Context, s *pooled) error {
	fp, err := p.fingerprint(ctx, s.name)
	if err != nil {
		return err
	}
	s.fingerprint = fp
	if err := p.strings(ctx, &s.tables, `SELECT tablename FROM pg_tables WHERE schemaname = $1 ORDER BY tablename`, s.name); err != nil {
		return err
	}
	if _, err := p.db.ExecContext(ctx, `CREATE SCHEMA `+s.name+`_seed`); err != nil {
		return err
	}
	for _, table := range s.tables {
		var any bool
		if err := p.db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM `+s.name+`.`+table+`)`).Scan(&any); err != nil {
			return err
		}
		if !any {
			continue
		}
		var cols []string
		if err := p.strings(ctx, &cols, `SELECT quote_ident(attname) FROM pg_attribute
			WHERE attrelid = ($1 || '.' || $2)::regclass AND attnum > 0 AND NOT attisdropped AND attgenerated = ''
			ORDER BY attnum`, s.name, table); err != nil {
			return err
		}
		list := strings.Join(cols, ", ")
		if _, err := p.db.ExecContext(ctx, `CREATE TABLE `+s.name+`_seed.`+table+` AS SELECT `+list+` FROM `+s.name+`.`+table); err != nil {
			return err
		}
		s.seeded[table] = list
	}
	rows, err := p.db.QueryContext(ctx, `SELECT sequencename, COALESCE(last_value, start_value), last_value IS NOT NULL
		FROM pg_sequences WHERE schemaname = $1`, s.name)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var q sequenceAt
		if err := rows.Scan(&q.name, &q.value, &q.called); err != nil {
			return err
		}
		s.sequences = append(s.sequences, q)
	}
	return rows.Err()
}

// reset empties s's tables back to the seed rows and puts its sequences where they stood.
func (p *pgPool) reset(ctx context.Context, s *pooled) error {
	tx, err := p.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	// Tests write little: a DELETE of each table, with triggers and foreign keys off (replica
	// role), is much cheaper than a TRUNCATE's new files; nothing waits for the commit's flush.
	if _, err := tx.ExecContext(ctx, `SET LOCAL session_replication_role = replica; SET LOCAL synchronous_commit = off`); err != nil {
		return err
	}
	for _, table := range s.tables {
		if _, err := tx.ExecContext(ctx, `DELETE FROM `+s.name+`.`+table); err != nil {
			return err
		}
	}
	for table, cols := range s.seeded {
		if _, err := tx.ExecContext(ctx, `INSERT INTO `+s.name+`.`+table+` (`+cols+`) OVERRIDING SYSTEM VALUE SELECT `+cols+
			` FROM `+s.name+`_seed.`+table); err != nil {
			return err
		}
	}
	for _, q := range s.sequences {
		if _, err := tx.ExecContext(ctx, `SELECT setval($1, $2, $3)`, s.name+"."+q.name, q.value, q.called); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// fingerprint is the schema's catalog in one string: the identity (oid) and name of every
// relation (tables, indexes, sequences, views), column, default, constraint, trigger and
// function in it, with the columns' types, the triggers' state, the functions' bodies and the
// privileges. A change made and undone (a table renamed and back) leaves it as it was; a thing
// dropped and made again does not (a new oid).
func (p *pgPool) fingerprint(ctx context.Context, schema string) (string, error) {
	var fp string
	// The catalogs hold every schema of the server's tests: each part is looked up by index
	// (the relations' oids as an array), never scanned.
	err := p.db.QueryRowContext(ctx, `WITH ns AS (SELECT oid FROM pg_namespace WHERE nspname = $1::text),
		rels AS (SELECT array_agg(c.oid) AS oids,
			string_agg(c.oid::text || c.relname || c.relkind::text || COALESCE(c.relacl::text, ''), ',' ORDER BY c.oid) AS fp
			FROM pg_class c WHERE c.relnamespace = (SELECT oid FROM ns))
		SELECT md5(concat_ws('|', (SELECT fp FROM rels),
		(SELECT string_agg(a.attrelid::text || a.attname || a.atttypid::text || a.atttypmod::text || a.attnotnull::text, ','
				ORDER BY a.attrelid, a.attnum)
			FROM pg_attribute a WHERE a.attrelid = ANY ((SELECT oids FROM rels)::oid[]) AND a.attnum > 0 AND NOT a.attisdropped),
		(SELECT string_agg(d.oid::text, ',' ORDER BY d.oid) FROM pg_attrdef d WHERE d.adrelid = ANY ((SELECT oids FROM rels)::oid[])),
		(SELECT string_agg(k.oid::text || k.conname, ',' ORDER BY k.oid) FROM pg_constraint k WHERE k.connamespace = (SELECT oid FROM ns)),
		(SELECT string_agg(t.oid::text || t.tgname || t.tgenabled::text, ',' ORDER BY t.oid)
			FROM pg_trigger t WHERE t.tgrelid = ANY ((SELECT oids FROM rels)::oid[]) AND NOT t.tgisinternal),
		(SELECT string_agg(f.oid::text || f.proname || md5(f.prosrc), ',' ORDER BY f.oid) FROM pg_proc f
			WHERE f.pronamespace = (SELECT oid FROM ns))))`,
		schema).Scan(&fp)
	return fp, err
}

func (p *pgPool) strings(ctx context.Context, out *[]string, query string, args ...any) error {
	rows, err := p.db.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return err
		}
		*out = append(*out, v)
	}
	return rows.Err()
}

// MigratedPostgresURL is a migrated schema from the pool on the server at base, holding only
// what the migrations put there, for the test alone; it goes back to the pool when the test ends.
func MigratedPostgresURL(t testing.TB, base string) string {
	t.Helper()
	p, err := poolFor(base)
	if err != nil {
		t.Fatalf("postgres: schema pool: %v", err)
	}
	s := p.take(t)
	t.Cleanup(func() { p.give(s) })
	return schemaURL(t, base, s.name)
}

// schemaURL is base with its connections' search_path set to schema.
func schemaURL(t testing.TB, base, schema string) string {
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("postgres url: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
