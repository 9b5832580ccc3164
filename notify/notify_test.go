package notify_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/owed/owed/notify"
	"github.com/owed/owed/owedtest"
)

func fired(w *notify.Watch) bool {
	select {
	case <-w.C():
		return true
	default:
		return false
	}
}

// waitFired waits for w to fire; the bound only keeps a broken build from hanging.
func waitFired(t *testing.T, w *notify.Watch, what string) {
	t.Helper()
	select {
	case <-w.C():
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: the watch did not fire", what)
	}
}

// TestWatchFiresOnTheAuthorsChangeOnly: a watch fires at its author's next change, not at
// another's; a renewed watch waits for the change after; closed watches leave nothing behind.
func TestWatchFiresOnTheAuthorsChangeOnly(t *testing.T) {
	t.Parallel()
	h := notify.New("", nil)
	if h.Listens() {
		t.Fatal("an in-process hub listens")
	}
	a1, a2, b := h.Watch(1), h.Watch(1), h.Watch(2)
	h.Changed(3)
	if fired(a1) || fired(a2) || fired(b) {
		t.Fatal("another author's change fired a watch")
	}
	h.Changed(1)
	if !fired(a1) || !fired(a2) || fired(b) {
		t.Fatalf("after author 1's change: fired %v %v %v, want true true false", fired(a1), fired(a2), fired(b))
	}
	a1 = a1.Renew()
	if fired(a1) {
		t.Fatal("a renewed watch fired before the next change")
	}
	h.Changed(1, 2)
	if !fired(a1) || !fired(b) {
		t.Fatal("a change of two authors did not fire both")
	}
	for _, w := range []*notify.Watch{a1, a2, b} {
		w.Close()
		w.Close()
	}
	c := h.Watch(5)
	c.Close()
	if n := h.Waiting(); n != 0 {
		t.Fatalf("%d authors still waited for after every watch closed", n)
	}
	d := h.Watch(6)
	h.WakeAll()
	if !fired(d) || h.WokenAll() != 1 {
		t.Fatal("WakeAll did not fire every watch once")
	}
	d.Close()
}

// TestListenHearsOtherConnectionsAndReconnects: on PostgreSQL the hub hears pg_notify from
// any connection (its own schema's only); when its LISTEN connection is cut it reconnects and
// wakes every waiter once, then hears changes again.
func TestListenHearsOtherConnectionsAndReconnects(t *testing.T) {
	t.Parallel()
	base := os.Getenv(owedtest.PostgresEnv)
	if base == "" {
		t.Skip("needs PostgreSQL: set " + owedtest.PostgresEnv)
	}
	url := owedtest.PostgresURL(t, base)
	hubURL, app := listenerURL(url)
	ctx := context.Background()
	h := notify.New(hubURL, owedtest.Logger(t))
	if !h.Listens() {
		t.Fatal("a PostgreSQL hub does not listen")
	}
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer h.Stop()
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var schema string
	if err := db.QueryRow(`SELECT current_schema()`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	send := func(payload string) {
		t.Helper()
		if _, err := db.Exec(`SELECT pg_notify($1, $2)`, notify.Channel, payload); err != nil {
			t.Fatal(err)
		}
	}

	seven, eight := h.Watch(7), h.Watch(8)
	send("someone_else:7") // another schema's owed in the same database
	send(schema + ":8")
	waitFired(t, eight, "author 8's notification")
	// Notifications arrive in order on the one connection: the other schema's was handled first.
	if fired(seven) {
		t.Fatal("another schema's notification woke author 7's watch")
	}
	send(schema + ":7")
	waitFired(t, seven, "author 7's notification")

	// Cut the LISTEN connection: the hub wakes everyone at once (nothing is heard while it is
	// down), reconnects, and wakes everyone once more (what changed meanwhile was not heard).
	waiting := h.Watch(9)
	pid := listenerPID(t, db, app)
	if _, err := db.Exec(`SELECT pg_terminate_backend($1)`, pid); err != nil {
		t.Fatal(err)
	}
	waitFired(t, waiting, "the loss")
	again := h.Watch(9)
	waitFired(t, again, "the reconnect")
	again.Close()
	if n := h.WokenAll(); n < 2 {
		t.Errorf("woken all %d times after one cut, want the loss and the reconnect", n)
	}
	if now := listenerPID(t, db, app); now == pid {
		t.Error("the listener's backend is the one that was cut")
	}
	ten := h.Watch(10)
	send(schema + ":" + strconv.Itoa(10))
	waitFired(t, ten, "a notification after the reconnect")
	for _, w := range []*notify.Watch{seven, eight, waiting, ten} {
		w.Close()
	}
}

// TestNext: a woken waiter's Next watches the change after the one that woke it, so a change
// between the wake and the call is not missed (the new watch is already closed), while Renew
// watches from now.
func TestNext(t *testing.T) {
	h := notify.New("", nil)
	w := h.Watch(1)
	h.Changed(1)
	if !fired(w) || w.At() == 0 {
		t.Fatal("the watch did not fire")
	}
	before := notify.Mark()
	h.Changed(1) // after the wake, before Next
	n := w.Next()
	if !fired(n) || n.At() <= before {
		t.Fatal("Next missed the change between the wake and the call")
	}
	n2 := n.Next()
	if fired(n2) {
		t.Fatal("Next fired with no change after")
	}
	h.Changed(1)
	if !fired(n2) {
		t.Fatal("Next did not fire at the next change")
	}
	n2.Close()
	if h.Waiting() != 0 || h.Watchers() != 0 {
		t.Fatalf("after the last close: %d authors, %d watches", h.Waiting(), h.Watchers())
	}
}

// listenerURL is url with an application_name of its own (app), which names the LISTEN
// connection of a hub given it, and no other connection.
func listenerURL(url string) (hubURL, app string) {
	app = fmt.Sprintf("owednotify%d", time.Now().UnixNano())
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	return url + sep + "application_name=" + app, app
}

// listenerPID is the backend of the connection named app (listenerURL).
func listenerPID(t *testing.T, db *sql.DB, app string) int64 {
	t.Helper()
	var pid int64
	if err := db.QueryRow(`SELECT pid FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&pid); err != nil {
		t.Fatalf("the listener's backend: %v", err)
	}
	return pid
}
