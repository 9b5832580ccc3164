package owedtest

import (
	"context"
	"os"
	"testing"
)

// TestPoolResetsOrDropsItsSchemas: a schema given back is emptied to what the migrations left
// (their own rows kept, a test's rows gone, ids counting from where they stood) and handed out
// again; one whose tables a test changed is dropped instead.
func TestPoolResetsOrDropsItsSchemas(t *testing.T) {
	base := os.Getenv(PostgresEnv)
	if base == "" {
		t.Skip(PostgresEnv + " is not set")
	}
	ctx := context.Background()
	p, err := poolFor(base)
	if err != nil {
		t.Fatal(err)
	}
	count := func(q string) (n int) {
		t.Helper()
		if err := p.db.QueryRowContext(ctx, q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	s := p.take(t)
	migrated := count(`SELECT COUNT(*) FROM ` + s.name + `.schema_migrations`)
	if migrated == 0 {
		t.Fatal("a pool schema is not migrated")
	}
	var firstID int64
	insert := `INSERT INTO ` + s.name + `.users (name, role, token_hash, created_at) VALUES ('ann', 'author', 'h', 0) RETURNING id`
	if err := p.db.QueryRowContext(ctx, insert).Scan(&firstID); err != nil {
		t.Fatal(err)
	}
	p.give(s)
	again := p.take(t)
	if again != s {
		t.Fatalf("took %s after giving back %s: the pool did not reuse it", again.name, s.name)
	}
	if n := count(`SELECT COUNT(*) FROM ` + s.name + `.users`); n != 0 {
		t.Errorf("%d users in a schema given back: a test's rows stayed", n)
	}
	if n := count(`SELECT COUNT(*) FROM ` + s.name + `.schema_migrations`); n != migrated {
		t.Errorf("%d migrations recorded after the reset, want %d", n, migrated)
	}
	var id int64
	if err := p.db.QueryRowContext(ctx, insert).Scan(&id); err != nil || id != firstID {
		t.Errorf("the first user after a reset has id %d (%v); want %d, as on a fresh schema", id, err, firstID)
	}
	if _, err := p.db.ExecContext(ctx, `ALTER TABLE `+s.name+`.users ADD COLUMN extra int`); err != nil {
		t.Fatal(err)
	}
	p.give(again)
	if n := count(`SELECT COUNT(*) FROM pg_namespace WHERE nspname = '` + s.name + `'`); n != 0 {
		t.Error("a schema whose table a test changed went back to the pool")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range p.free {
		if f == s {
			t.Error("the changed schema is among the free ones")
		}
	}
}
