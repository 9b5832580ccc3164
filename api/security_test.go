package api_test

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"

	"github.com/owed/owed/owedtest"
)

// seriesCount counts the sample lines /metrics serves for owed's own metrics (the Go and
// process collectors vary on their own).
func seriesCount(t *testing.T, env *owedtest.Env) (int, string) {
	t.Helper()
	r := env.Do(http.MethodGet, "/metrics", "", nil)
	if r.Status != http.StatusOK {
		t.Fatalf("metrics: %d", r.Status)
	}
	n := 0
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(r.Body))
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "owed_http_") {
			n++
			lines = append(lines, l)
		}
	}
	return n, strings.Join(lines, "\n")
}

// randomRequest sends a request with a made-up method to a made-up path, no token: what a
// scanner or a hostile caller sends.
func randomRequest(t *testing.T, env *owedtest.Env, rng *rand.Rand) {
	t.Helper()
	const letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	m := make([]byte, 3+rng.IntN(8))
	for i := range m {
		m[i] = letters[rng.IntN(len(letters))]
	}
	paths := []string{
		fmt.Sprintf("/x%d/%d", rng.Int64(), rng.Int64()),
		fmt.Sprintf("/api/nope-%d", rng.Int64()),
		fmt.Sprintf("/api/songs/%d", rng.Int64N(1<<40)),
		fmt.Sprintf("/admin/%d.js", rng.Int64()),
		fmt.Sprintf("/api/scrapes/%d/media", rng.Int64N(1<<40)),
	}
	req, err := http.NewRequest(string(m), env.Server.URL+paths[rng.IntN(len(paths))], nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := env.Server.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
}

// TestMetricsLabelsAreBounded (issue 12, row 3): made-up methods and paths do not become label
// values. After a first round has met every route, method class and status the random requests
// can reach, ten times as many more add no series at all.
func TestMetricsLabelsAreBounded(t *testing.T) {
	env := owedtest.NewEnv(t, "sqlite:"+t.TempDir()+"/owed.db")
	rng := rand.New(rand.NewPCG(12, 3))
	for range 20 {
		randomRequest(t, env, rng)
	}
	// Every well-known method once too, on each kind of path.
	for _, m := range []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "PROPFIND"} {
		for _, p := range []string{"/x/y", "/api/songs/1", "/admin/a.js", "/api/scrapes/1/media", "/api/nope"} {
			req, _ := http.NewRequest(m, env.Server.URL+p, nil)
			if res, err := env.Server.Client().Do(req); err == nil {
				res.Body.Close()
			}
		}
	}
	seriesCount(t, env) // /metrics counts itself from its first scrape on
	after20, _ := seriesCount(t, env)
	for range 200 {
		randomRequest(t, env, rng)
	}
	after200, lines := seriesCount(t, env)
	if after200 != after20 {
		t.Errorf("series grew from %d to %d with random methods and paths:\n%s", after20, after200, lines)
	}
	for _, bad := range []string{`method="PROPFIND"`, "/x", "nope", ".js"} {
		if strings.Contains(lines, bad) {
			t.Errorf("a caller's %s became a label value", bad)
		}
	}
	if !strings.Contains(lines, `method="other"`) {
		t.Errorf("made-up methods are not counted as other:\n%s", lines)
	}
}
