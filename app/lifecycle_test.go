package app_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// TestAFailingListenerIsReported: a listener that fails while serving (here closed under the
// server) is sent to Failed with what failed, instead of leaving the runners working with no
// HTTP; the process then shuts down as on a signal.
func TestAFailingListenerIsReported(t *testing.T) {
	owedtest.Dialects(t, func(t *testing.T, db string) {
		a, ln := owedtest.Serve(t, db)
		select {
		case err := <-a.Failed():
			t.Fatalf("Failed before the listener failed: %v", err)
		default:
		}
		ln.Close()
		select {
		case err := <-a.Failed():
			if err == nil || !strings.Contains(err.Error(), "serving HTTP on "+ln.Addr().String()) {
				t.Errorf("Failed gave %v; want the HTTP listener's error, naming its address", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a closed listener was not reported on Failed")
		}
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := a.Shutdown(sctx); err != nil {
			t.Errorf("Shutdown after the listener failed: %v", err)
		}
	})
}

// TestShutdownUnderOneDeadlineEndsStreamsAndKeepsTheNotifierForTheRunners: a served process
// with an author's stream open stops under one deadline. HTTP's graceful shutdown ends the
// stream (else it would wait on it until the deadline and fail); a drain that outlasts the
// deadline leaves the runners no grace of their own; and the notifier still hears what the
// runners commit while they stop (on PostgreSQL, a notifier stopped before them would not).
func TestShutdownUnderOneDeadlineEndsStreamsAndKeepsTheNotifierForTheRunners(t *testing.T) {
	owedtest.Dialects(t, func(t *testing.T, db string) {
		a, ln := owedtest.Serve(t, db)
		bg := context.Background()
		author, token, err := a.Store.CreateUser(bg, "ann", models.RoleAuthor)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodGet, "http://"+ln.Addr().String()+"/api/listeners/mine/stream", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("stream: %v %v", res, err)
		}
		events := owedtest.ReadSSE(res.Body)
		for ev := range events {
			if ev.Event == "mine" {
				break
			}
		}

		ctx, cancel := context.WithTimeout(bg, 4*time.Second) // room for a loaded machine to end the stream
		defer cancel()
		deadline, _ := ctx.Deadline()
		limit := int64(7)
		err = a.ShutdownWith(ctx, map[string]func(context.Context) error{
			"http": func(ctx context.Context) error { <-ctx.Done(); return nil }, // a request that outlasts the deadline
			"runners": func(ctx context.Context) error {
				if d, _ := ctx.Deadline(); ctx.Err() == nil || !d.Equal(deadline) {
					t.Errorf("the runners stop with the deadline %v, done: %v; want the one deadline %v, used up by HTTP", d, ctx.Err(), deadline)
				}
				w := a.Notify.Watch(author.ID)
				defer w.Close()
				if _, err := a.Store.SetDailyLimit(context.WithoutCancel(ctx), author.ID, &limit); err != nil {
					return err
				}
				select {
				case <-w.C():
				case <-time.After(20 * time.Second): // only a failure waits this long
					t.Error("a change committed while the runners stop woke nobody: the notifier had stopped before them")
				}
				return nil
			},
		})
		if err != nil {
			t.Errorf("Shutdown: %v (the HTTP server still waited on the stream at the deadline?)", err)
		}
		for ev := range events { // the stream has ended: its body closes
			if ev.Event != "" {
				t.Errorf("an event after the shutdown began: %+v", ev)
			}
		}
	})
}
