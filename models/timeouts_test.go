package models_test

import (
	"context"
	"database/sql"
	"encoding/binary"
	"io"
	"net"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/owedtest/clocktest"
)

// TestStatementsOutsideATransactionTimeOut: on PostgreSQL the lock timeout bounds a statement
// that runs outside a transaction too (a claim, a read, a write of its own): each waiting on
// an outside lock fails with a timeout fault after the lock timeout, not when the lock ends.
func TestStatementsOutsideATransactionTimeOut(t *testing.T) {
	t.Parallel()
	base := os.Getenv(owedtest.PostgresEnv)
	if base == "" {
		t.Skip("PostgreSQL only: set " + owedtest.PostgresEnv)
	}
	url := owedtest.PostgresURL(t, base)
	const lockTimeout = 300 * time.Millisecond
	s := owedtest.Store(t, url, clocktest.NewFake(owedtest.Start), func(o *models.Options) { o.LockTimeout = lockTimeout })

	locker, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close()
	tx, err := locker.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec(`LOCK TABLE content_jobs, model_breaker IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}

	// Without the timeout each would wait for the lock's end: the deadline makes that a
	// failure of its own kind instead of a hang.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, c := range []struct {
		name string
		run  func() error
	}{
		{"claim", func() error { _, err := s.ClaimDue(ctx, 10, time.Minute, "owner", 0); return err }},
		{"read", func() error { _, err := s.ReadBreaker(ctx); return err }},
		{"write", func() error {
			_, err := s.RawExec(ctx, `UPDATE model_breaker SET failures = failures WHERE id = 1`)
			return err
		}},
	} {
		began := time.Now()
		err := c.run()
		if took := time.Since(began); models.FaultOf(err) != models.FaultTimeout || took > 5*time.Second {
			t.Errorf("%s under an outside lock: %v (fault %v) after %v; want a timeout fault after about %v",
				c.name, err, models.FaultOf(err), took, lockTimeout)
		}
	}

	// Once the lock is gone the same statements succeed, each committed.
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ClaimDue(ctx, 10, time.Minute, "owner", 0); err != nil {
		t.Errorf("a claim after the lock: %v", err)
	}
	if _, err := s.ReadBreaker(ctx); err != nil {
		t.Errorf("a read after the lock: %v", err)
	}
}

// TestCloseWaitsForCancelRequests: a statement cut off by its context leaves pgx a cancel
// request to send on a connection of its own; Close returns only once it has been answered,
// so a process that exits right after Close never cuts one off half-way (pgbouncer 1.18
// crashes on a cancel request whose client leaves first). Here a slow pooler stands between
// the store and the server: it holds each cancel request until Close has been called.
func TestCloseWaitsForCancelRequests(t *testing.T) {
	t.Parallel()
	base := os.Getenv(owedtest.PostgresEnv)
	if base == "" {
		t.Skip("PostgreSQL only: set " + owedtest.PostgresEnv)
	}
	direct, err := url.Parse(owedtest.PostgresURL(t, base))
	if err != nil {
		t.Fatal(err)
	}
	slow := newCancelHolder(t, direct.Host)
	through := *direct
	through.Host = slow.addr
	s, err := models.Open(context.Background(), models.Options{URL: through.String(), DataDir: t.TempDir(), Clock: clocktest.NewFake(owedtest.Start), MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := s.RawExec(ctx, `SELECT pg_sleep(10)`); err == nil {
		t.Fatal("a statement cut off by its context succeeded")
	}
	<-slow.received
	close(slow.release) // the pooler reaches the server only now, as Close begins
	s.Close()
	if !slow.answered.Load() {
		t.Error("Close returned before the cancel request of a statement it cut off was answered")
	}
}

// cancelHolder is a TCP proxy to a PostgreSQL server that holds each cancel request until
// release is closed before it passes it on; answered says one was passed on and the server
// closed it.
type cancelHolder struct {
	addr     string
	received chan struct{} // a cancel request arrived (once)
	release  chan struct{}
	answered atomic.Bool
}

func newCancelHolder(t *testing.T, server string) *cancelHolder {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	h := &cancelHolder{addr: ln.Addr().String(), received: make(chan struct{}), release: make(chan struct{})}
	var once sync.Once
	go func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer client.Close()
				head := make([]byte, 8)
				if _, err := io.ReadFull(client, head); err != nil {
					return
				}
				isCancel := binary.BigEndian.Uint32(head[4:]) == 80877102
				if isCancel {
					once.Do(func() { close(h.received) })
					<-h.release
				}
				srv, err := net.Dial("tcp", server)
				if err != nil {
					return
				}
				defer srv.Close()
				srv.Write(head)
				go io.Copy(srv, client)
				io.Copy(client, srv) // until the server closes
				if isCancel {
					h.answered.Store(true)
				}
			}()
		}
	}()
	return h
}
