package frontend

import (
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

func get(t *testing.T, h http.Handler, target string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, target, nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func checkSecurityHeaders(t *testing.T, target string, rec *httptest.ResponseRecorder) {
	t.Helper()
	if got := rec.Header().Get("Content-Security-Policy"); got != ContentSecurityPolicy {
		t.Errorf("%s: CSP = %q", target, got)
	}
	if got := rec.Header().Get("X-Content-Type-Options"); got != "nosniff" {
		t.Errorf("%s: X-Content-Type-Options = %q", target, got)
	}
	if got := rec.Header().Get("Referrer-Policy"); got != "no-referrer" {
		t.Errorf("%s: Referrer-Policy = %q", target, got)
	}
}

func TestCSPValue(t *testing.T) {
	want := "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
	if ContentSecurityPolicy != want {
		t.Fatalf("CSP = %q", ContentSecurityPolicy)
	}
}

func TestIndexAndFallback(t *testing.T) {
	h := Handler("")
	for _, target := range []string{"/admin", "/admin/", "/admin/backfill", "/admin/jobs?why=budget", "/admin/webhooks/", "/admin/jobs/12"} {
		rec := get(t, h, target)
		if rec.Code != http.StatusOK {
			t.Fatalf("%s: status %d", target, rec.Code)
		}
		if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
			t.Errorf("%s: Content-Type %q", target, ct)
		}
		if cc := rec.Header().Get("Cache-Control"); cc != "no-cache" {
			t.Errorf("%s: Cache-Control %q", target, cc)
		}
		if !strings.Contains(rec.Body.String(), `src="/admin/app.js"`) {
			t.Errorf("%s: body is not index.html", target)
		}
		checkSecurityHeaders(t, target, rec)
	}
}

func TestStaticFiles(t *testing.T) {
	h := Handler("")
	cases := map[string]string{
		"/admin/app.js":                "text/javascript",
		"/admin/style.css":             "text/css",
		"/admin/vendor/preact-htm.js":  "text/javascript",
		"/admin/lib/fmt.js":            "text/javascript",
		"/admin/favicon.svg":           "image/svg+xml",
		"/admin/vendor/LICENSE.txt":    "text/plain",
		"/admin/plugins/backfill.js":   "text/javascript",
		"/admin/plugins/overview.js":   "text/javascript",
		"/admin/index.html":            "text/html",
		"/admin/lib/ctx.js":            "text/javascript",
		"/admin/plugins/webhooks.js":   "text/javascript",
		"/admin/plugins/../app.js":     "",
		"/admin/./app.js":              "",
		"/admin//app.js":               "",
		"/admin/plugins/missing.js":    "",
		"/admin/nope.css":              "",
		"/somewhere/else":              "",
		"/admin/vendor/preact-htm.js/": "",
	}
	for target, ct := range cases {
		rec := get(t, h, target)
		checkSecurityHeaders(t, target, rec)
		if ct == "" {
			if rec.Code != http.StatusNotFound {
				t.Errorf("%s: status %d, want 404", target, rec.Code)
			}
			continue
		}
		if rec.Code != http.StatusOK {
			t.Errorf("%s: status %d", target, rec.Code)
			continue
		}
		if got := rec.Header().Get("Content-Type"); !strings.HasPrefix(got, ct) {
			t.Errorf("%s: Content-Type %q, want %s", target, got, ct)
		}
	}
}

func TestETagRevalidation(t *testing.T) {
	h := Handler("")
	rec := get(t, h, "/admin/app.js")
	etag := rec.Header().Get("ETag")
	if etag == "" {
		t.Fatal("no ETag")
	}
	req := httptest.NewRequest(http.MethodGet, "/admin/app.js", nil)
	req.Header.Set("If-None-Match", etag)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusNotModified {
		t.Fatalf("status %d, want 304", rec.Code)
	}
	checkSecurityHeaders(t, "304", rec)
}

func TestMethodNotAllowed(t *testing.T) {
	h := Handler("")
	req := httptest.NewRequest(http.MethodPost, "/admin/backfill", nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusMethodNotAllowed {
		t.Fatalf("status %d", rec.Code)
	}
	checkSecurityHeaders(t, "POST", rec)
	req = httptest.NewRequest(http.MethodHead, "/admin/backfill", nil)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || rec.Body.Len() != 0 {
		t.Fatalf("HEAD: status %d, %d bytes", rec.Code, rec.Body.Len())
	}
}

// pluginsFixture makes <tmp>/secret.js (outside), <tmp>/plugins with operator plugins.
func pluginsFixture(t *testing.T) (root, dir string) {
	t.Helper()
	root = t.TempDir()
	dir = filepath.Join(root, "plugins")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Mkdir(dir, 0o755))
	must(os.WriteFile(filepath.Join(root, "secret.js"), []byte("export const secret = 'TOP-SECRET';\n"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "hello.js"), []byte("// title: Hello world\nexport default { id: 'hello', title: 'Hello', mount(el) { el.textContent = 'hi'; } };\n"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "alerts.js"), []byte("export default { id: 'alerts', mount() {} };\n"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "jobs.js"), []byte("// title: My jobs\nexport default {};\n"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not a plugin"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "_shared.js"), []byte("export const shared = 1;\n"), 0o644))
	must(os.WriteFile(filepath.Join(dir, ".hidden.js"), []byte("hidden"), 0o644))
	must(os.Mkdir(filepath.Join(dir, "sub.js"), 0o755))
	must(os.Mkdir(filepath.Join(dir, "nested"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "nested", "deep.js"), []byte("deep"), 0o644))
	if runtime.GOOS != "windows" {
		must(os.Symlink(filepath.Join(root, "secret.js"), filepath.Join(dir, "escape.js")))
	}
	return root, dir
}

func TestExtPluginServed(t *testing.T) {
	_, dir := pluginsFixture(t)
	h := Handler(dir)
	rec := get(t, h, "/admin/ext/hello.js")
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d", rec.Code)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "text/javascript; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	if !strings.Contains(rec.Body.String(), "el.textContent = 'hi'") {
		t.Errorf("body %q", rec.Body.String())
	}
	// A helper module (leading "_") is served though not listed as a plugin.
	if rec := get(t, h, "/admin/ext/_shared.js"); rec.Code != http.StatusOK {
		t.Errorf("_shared.js: status %d", rec.Code)
	}
	checkSecurityHeaders(t, "ext", rec)

	for _, target := range []string{
		"/admin/ext/missing.js",
		"/admin/ext/notes.txt",
		"/admin/ext/.hidden.js",
		"/admin/ext/sub.js",
		"/admin/ext/nested/deep.js",
		"/admin/ext/escape.js", // a symlink out of the folder
	} {
		rec := get(t, h, target)
		if rec.Code != http.StatusNotFound {
			t.Errorf("%s: status %d, want 404", target, rec.Code)
		}
		checkSecurityHeaders(t, target, rec)
	}

	// Without a plugins folder nothing is served from ext.
	if rec := get(t, Handler(""), "/admin/ext/hello.js"); rec.Code != http.StatusNotFound {
		t.Errorf("no dir: status %d", rec.Code)
	}
}

func TestExtTraversalRefused(t *testing.T) {
	_, dir := pluginsFixture(t)
	h := Handler(dir)
	for _, target := range []string{
		"/admin/ext/../embed.go",
		"/admin/ext/%2e%2e/embed.go",
		"/admin/ext/%2E%2E/secret.js",
		"/admin/ext/../secret.js",
		"/admin/ext/..%2fsecret.js",
		"/admin/ext/..%5csecret.js",
		"/admin/ext/%2e%2e%2fsecret.js",
		"/admin/ext/./hello.js",
		"/admin/../go.mod",
		"/admin/%2e%2e/embed.go",
		"/admin/ext/hello.js%00.js",
	} {
		rec := get(t, h, target)
		if rec.Code == http.StatusOK {
			t.Errorf("%s: served (%d bytes)", target, rec.Body.Len())
		}
		if body := rec.Body.String(); strings.Contains(body, "TOP-SECRET") || strings.Contains(body, "package frontend") {
			t.Errorf("%s: leaked a file", target)
		}
		checkSecurityHeaders(t, target, rec)
	}
}

// TestExtTraversalOverTheWire sends raw request lines, as a client that does not clean paths
// would, through a real server.
func TestExtTraversalOverTheWire(t *testing.T) {
	_, dir := pluginsFixture(t)
	srv := httptest.NewServer(Handler(dir))
	defer srv.Close()
	for _, p := range []string{"/admin/ext/../secret.js", "/admin/ext/%2e%2e/secret.js", "/admin/ext/..%2fsecret.js"} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(conn, "GET "+p+" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		raw, _ := io.ReadAll(conn)
		conn.Close()
		resp := string(raw)
		if strings.HasPrefix(resp, "HTTP/1.1 200") || strings.Contains(resp, "TOP-SECRET") {
			t.Errorf("%s: %q", p, firstLine(resp))
		}
	}
	resp, err := http.Get(srv.URL + "/admin/ext/hello.js")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("hello.js over the wire: %d", resp.StatusCode)
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func TestPluginsListing(t *testing.T) {
	want := []Plugin{
		{"overview", "Overview", "/admin/plugins/overview.js"},
		{"jobs", "Content jobs", "/admin/plugins/jobs.js"},
		{"review", "Review", "/admin/plugins/review.js"},
		{"backfill", "Backfill", "/admin/plugins/backfill.js"},
		{"budgets", "Budgets", "/admin/plugins/budgets.js"},
		{"events", "Events", "/admin/plugins/events.js"},
		{"webhooks", "Webhooks", "/admin/plugins/webhooks.js"},
		{"audit", "Audit", "/admin/plugins/audit.js"},
		{"items", "Items", "/admin/plugins/items.js"},
		{"shadow", "Shadow", "/admin/plugins/shadow.js"},
	}
	if got := Plugins(""); !reflect.DeepEqual(got, want) {
		t.Fatalf("Plugins(\"\") = %v", got)
	}
	if got := Plugins(filepath.Join(t.TempDir(), "missing")); !reflect.DeepEqual(got, want) {
		t.Fatalf("missing dir: %v", got)
	}

	_, dir := pluginsFixture(t)
	got := Plugins(dir)
	ext := []Plugin{
		{"alerts", "alerts", "/admin/ext/alerts.js"},
		{"hello", "Hello world", "/admin/ext/hello.js"},
		{"ext-jobs", "My jobs", "/admin/ext/jobs.js"},
	}
	if !reflect.DeepEqual(got, append(append([]Plugin{}, want...), ext...)) {
		t.Fatalf("Plugins(dir) = %v", got)
	}

	// Every listed module is served by the handler.
	h := Handler(dir)
	for _, p := range got {
		if rec := get(t, h, p.Module); rec.Code != http.StatusOK {
			t.Errorf("%s: %d", p.Module, rec.Code)
		}
	}
}

// TestIndexIsCSPClean: the pages carry no inline script, style element or style attribute,
// and no inline event handler, which the CSP would block.
func TestIndexIsCSPClean(t *testing.T) {
	sub, _ := fs.Sub(embedded, "dist")
	bad := []*regexp.Regexp{
		regexp.MustCompile(`(?i)<script(\s[^>]*)?>\s*[^<\s]`),
		regexp.MustCompile(`(?i)<script(?:\s+type="module")?\s*>`),
		regexp.MustCompile(`(?i)<style`),
		regexp.MustCompile(`(?i)\sstyle\s*=`),
		regexp.MustCompile(`(?i)\son[a-z]+\s*=\s*"`),
		regexp.MustCompile(`(?i)javascript:`),
	}
	_ = fs.WalkDir(sub, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".html") {
			return err
		}
		b, _ := fs.ReadFile(sub, p)
		for _, re := range bad {
			if re.Match(b) {
				t.Errorf("%s matches %s", p, re)
			}
		}
		return nil
	})
}

// TestModuleImportsResolve: every relative or /admin/ import in the embedded modules names an
// embedded file, so a typo cannot ship a panel that fails to load.
func TestModuleImportsResolve(t *testing.T) {
	sub, _ := fs.Sub(embedded, "dist")
	imp := regexp.MustCompile(`(?m)(?:^|[;\s])(?:import|export)\s[^'";]*?from\s*['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)|^import\s+['"]([^'"]+)['"]`)
	n := 0
	_ = fs.WalkDir(sub, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".js") || strings.HasPrefix(p, "vendor/") {
			return err
		}
		b, _ := fs.ReadFile(sub, p)
		for _, m := range imp.FindAllStringSubmatch(string(b), -1) {
			spec := m[1] + m[2] + m[3]
			var target string
			switch {
			case strings.HasPrefix(spec, "/admin/"):
				target = strings.TrimPrefix(spec, "/admin/")
			case strings.HasPrefix(spec, "./"), strings.HasPrefix(spec, "../"):
				target = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(p), spec)))
			default:
				t.Errorf("%s: bare or absolute import %q", p, spec)
				continue
			}
			n++
			if _, err := fs.Stat(sub, target); err != nil {
				t.Errorf("%s: import %q: %s is not embedded", p, spec, target)
			}
		}
		return nil
	})
	if n < 10 {
		t.Errorf("only %d imports found; the pattern is broken", n)
	}
	for _, b := range builtins {
		if _, err := fs.Stat(sub, "plugins/"+b.ID+".js"); err != nil {
			t.Errorf("built-in plugin %s is missing", b.ID)
		}
	}
}
