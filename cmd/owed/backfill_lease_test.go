package main

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/owedtest/wait"
)

// Three real replicas on one PostgreSQL: exactly one runs the backfill queue at a time, and when
// it stops another takes the queue over and finishes the job.
func TestOneReplicaRunsTheBackfillQueue(t *testing.T) {
	t.Parallel()
	base := os.Getenv(owedtest.PostgresEnv)
	if base == "" {
		t.Skip("needs PostgreSQL: set " + owedtest.PostgresEnv)
	}
	dbURL := owedtest.PostgresURL(t, base)

	var img bytes.Buffer
	pic := image.NewRGBA(image.Rect(0, 0, 8, 8))
	for i := range pic.Pix {
		pic.Pix[i] = 0x80
	}
	pic.Set(0, 0, color.Black)
	png.Encode(&img, pic)
	var inFlight, maxInFlight, served atomic.Int64
	cdn := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			m := maxInFlight.Load()
			if n <= m || maxInFlight.CompareAndSwap(m, n) {
				break
			}
		}
		// A request its replica gave up on (stopping cancels its fetch) ends here at once: it is
		// in flight only while a replica still waits for it.
		select {
		case <-time.After(150 * time.Millisecond):
		case <-r.Context().Done():
			return
		}
		served.Add(1)
		w.Header().Set("Content-Type", "image/png")
		w.Write(img.Bytes())
	}))
	defer cdn.Close()

	env := []string{"OWED_DATABASE_URL=" + dbURL, "OWED_ADMIN_TOKEN=" + owedtest.AdminToken, "OWED_DATABASE_MAX_CONNS=8",
		"OWED_SWEEP_EVERY=1s", "OWED_MEDIA_MIN_GAP_MS=0", "OWED_MEDIA_MAX_GAP_MS=0", "OWED_WRITE_RATE=0",
		"OWED_MEDIA_ALLOW_PRIVATE=1"} // the CDN is on loopback
	var replicas []*process
	for range 3 {
		replicas = append(replicas, startOwed(t, append(env, "OWED_DATA_DIR="+t.TempDir())...))
	}
	admin := owedtest.AdminToken
	status, scrape := replicas[0].post("/api/scrapes", admin, map[string]any{"chatId": "c1", "guildId": "g1", "backend": "puppet", "mode": "full"})
	if status != http.StatusCreated {
		t.Fatalf("create scrape: %d %v", status, scrape)
	}
	id := strconv.FormatInt(int64(scrape["id"].(float64)), 10)
	const rows = 40
	var media []map[string]any
	for i := range rows {
		media = append(media, map[string]any{"url": fmt.Sprintf("%s/img/%d.png", cdn.URL, i), "kind": "image"})
	}
	if status, body := replicas[1].post("/api/scrapes/"+id+"/media", admin, map[string]any{"media": media}); status != http.StatusAccepted {
		t.Fatalf("push media: %d %v", status, body)
	}
	if status, body := replicas[2].patch("/api/scrapes/"+id, admin, map[string]any{"state": "done"}); status != http.StatusOK {
		t.Fatalf("stop the walk: %d %v", status, body)
	}
	if status, body := replicas[0].post("/api/backfill/start", admin, map[string]any{}); status != http.StatusOK {
		t.Fatalf("start the backfill: %d %v", status, body)
	}

	db := openDB(t, dbURL)
	owner := func() string {
		var o *string
		db.QueryRow(`SELECT owner FROM backfill_runner WHERE id = 1`).Scan(&o)
		if o == nil {
			return ""
		}
		return *o
	}
	holderOf := func(o string) *process {
		for _, p := range replicas {
			if strings.Contains(o, ":"+strconv.Itoa(p.cmd.Process.Pid)+":") {
				return p
			}
		}
		return nil
	}
	wait.Within(t, 20*time.Second, "a replica to take the queue and preview some rows", func() bool {
		return owner() != "" && served.Load() >= 5
	})
	first := owner()
	holder := holderOf(first)
	if holder == nil {
		t.Fatalf("the queue's owner %q is none of the replicas", first)
	}
	if err := holder.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("stopping the queue's holder: %v", err)
	}
	cachedAtStop := countRows(t, db, `SELECT COUNT(*) FROM media WHERE state = 'cached'`)
	if cachedAtStop >= rows {
		t.Fatal("the job finished before its holder stopped; the test proves nothing")
	}
	var second string
	wait.Within(t, 30*time.Second, "another replica to take the queue over", func() bool {
		second = owner()
		return second != "" && second != first
	})
	if holderOf(second) == nil || holderOf(second) == holder {
		t.Fatalf("the queue moved to %q, want another live replica", second)
	}
	wait.Within(t, 60*time.Second, "every row to be previewed", func() bool {
		return countRows(t, db, `SELECT COUNT(*) FROM media WHERE state = 'cached'`) == rows
	})
	if m := maxInFlight.Load(); m > 1 {
		t.Fatalf("%d media requests were in flight at once: more than one replica ran the queue", m)
	}
	t.Logf("queue moved from %s to %s after %d of %d rows", first, second, cachedAtStop, rows)
}
