package modeltest_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/owed/owed/modelclient"
	"github.com/owed/owed/modelclient/modeltest"
	"github.com/owed/owed/models"

	"github.com/owed/owed/owedtest/wait"
)

var pitch = modelclient.ScreenRequest{Kind: modelclient.KindPitch, Subject: modelclient.Subject{Text: "a song about rain"}}

func TestFailNextThenRecover(t *testing.T) {
	f := modeltest.New(t)
	c := f.Client()
	f.FailNext(2, 503, map[string]string{"Retry-After": "4"})
	for i, want := range []models.Why{models.WhyUpstream, models.WhyUpstream, ""} {
		r := c.Screen(t.Context(), pitch)
		if r.Why != want {
			t.Fatalf("call %d: %+v, want why %q", i, r, want)
		}
		if want != "" && r.RetryAfter != 4*time.Second {
			t.Errorf("call %d: RetryAfter %v", i, r.RetryAfter)
		}
	}
	if f.Calls() != 3 || len(f.Requests()) != 3 {
		t.Errorf("calls %d, requests %d", f.Calls(), len(f.Requests()))
	}
}

func TestResetRestoresDefaults(t *testing.T) {
	f := modeltest.New(t)
	f.Fail(500, nil)
	f.SetVerdict("block", 0.1)
	f.RequireKey("k")
	f.Client().Screen(t.Context(), pitch)
	f.Reset()
	if f.Calls() != 0 || len(f.Requests()) != 0 {
		t.Fatalf("counters not reset: %d calls", f.Calls())
	}
	r := f.Client().Screen(t.Context(), pitch)
	if r.Why != "" || *r.Verdict != (modelclient.Verdict{Verdict: "allow", Confidence: 0.9}) {
		t.Errorf("after Reset: %+v", r)
	}
}

func TestRejectsBadRequests(t *testing.T) {
	f := modeltest.New(t)
	for _, body := range []string{`{"task":"dance"}`, `{"task":"screen","kind":"song"}`, `nope`} {
		res, err := http.Post(f.URL(), "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: status %d", body, res.StatusCode)
		}
	}
	res, err := http.Get(f.URL())
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: status %d", res.StatusCode)
	}
	reqs := f.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d requests recorded, want 4", len(reqs))
	}
	for _, q := range reqs {
		if q.Err == nil {
			t.Errorf("%s %s recorded without error", q.Method, q.Body)
		}
	}
}

// A hanging request is released when the test ends, even if its client
// never gives up: cleanup must not block.
func TestHangReleasedAtCleanup(t *testing.T) {
	done := make(chan modelclient.Reply, 1)
	t.Run("inner", func(t *testing.T) {
		f := modeltest.New(t)
		f.Hang()
		c := f.Client() // default 2m timeout
		go func() { done <- c.Screen(context.Background(), pitch) }()
		wait.Until(t, "the call to reach the fake", func() bool { return f.Calls() > 0 })
	})
	select {
	case r := <-done:
		if r.Why != models.WhyUnreachable {
			t.Errorf("reply = %+v", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("hanging request not released")
	}
}

func TestDelay(t *testing.T) {
	f := modeltest.New(t)
	f.Delay(30 * time.Millisecond)
	start := time.Now()
	if r := f.Client().Screen(t.Context(), pitch); r.Why != "" || time.Since(start) < 30*time.Millisecond {
		t.Errorf("reply %+v after %v", r, time.Since(start))
	}
}

func TestConcurrentUse(t *testing.T) {
	f := modeltest.New(t)
	c := f.Client()
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			if i%8 == 0 {
				f.SetVerdict("allow", 0.5)
			}
			if r := c.Screen(t.Context(), pitch); r.Why != "" {
				t.Errorf("reply = %+v", r)
			}
		})
	}
	wg.Wait()
	if f.Calls() != 64 || len(f.Requests()) != 64 {
		t.Errorf("calls %d, requests %d", f.Calls(), len(f.Requests()))
	}
}
