package outbound_test

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/owed/owed/outbound"
)

// TestSameOriginRedirects: with SameOrigin, a redirect within the request's origin is followed
// and one to another origin is not: the redirect is the answer and the other server gets
// nothing.
func TestSameOriginRedirects(t *testing.T) {
	var other atomic.Int64
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { other.Add(1) }))
	defer elsewhere.Close()
	home := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/moved":
			http.Redirect(w, r, "/here", http.StatusTemporaryRedirect)
		case "/away":
			http.Redirect(w, r, elsewhere.URL+"/x", http.StatusTemporaryRedirect)
		case "/here":
			w.Write([]byte("ok"))
		}
	}))
	defer home.Close()
	c := outbound.NewClient(outbound.Options{AllowPrivate: true, SameOrigin: true, Redirects: outbound.MaxRedirects})
	for path, want := range map[string]int{"/moved": http.StatusOK, "/away": http.StatusTemporaryRedirect} {
		res, err := c.Post(home.URL+path, "application/json", nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		res.Body.Close()
		if res.StatusCode != want {
			t.Errorf("%s: %d, want %d", path, res.StatusCode, want)
		}
	}
	if n := other.Load(); n != 0 {
		t.Fatalf("the other origin got %d requests", n)
	}
}
