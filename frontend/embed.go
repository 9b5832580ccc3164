// Package frontend serves the admin SPA: static ES modules embedded in the binary (no build
// step), plus operator plugin modules read from a folder at run time.
package frontend

import (
	"bufio"
	"bytes"
	"cmp"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"
)

//go:embed all:dist
var embedded embed.FS

// Prefix is the URL prefix the SPA lives under. The server mounts Handler with the prefix kept.
const Prefix = "/admin"

// ContentSecurityPolicy is sent with every response of the SPA handler. No inline script or
// style is allowed, so every script and stylesheet is a file under dist or the plugins folder.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; " +
	"img-src 'self' data: blob:; connect-src 'self'; font-src 'self'; object-src 'none'; " +
	"base-uri 'none'; frame-ancestors 'none'; form-action 'self'"

// Plugin is one entry of the SPA's plugin manifest (GET /api/admin/plugins).
type Plugin struct {
	ID     string
	Title  string
	Module string
}

// builtins are the panels shipped in dist/plugins, in tab order.
var builtins = []Plugin{
	{ID: "overview", Title: "Overview"},
	{ID: "jobs", Title: "Content jobs"},
	{ID: "review", Title: "Review"},
	{ID: "backfill", Title: "Backfill"},
	{ID: "budgets", Title: "Budgets"},
	{ID: "events", Title: "Events"},
	{ID: "webhooks", Title: "Webhooks"},
	{ID: "audit", Title: "Audit"},
	{ID: "items", Title: "Items"},
	{ID: "shadow", Title: "Shadow"},
}

// pluginFile is the only shape of name served from the plugins folder: one path element,
// no leading dot, ending in .js.
var pluginFile = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*\.js$`)

var titleLine = regexp.MustCompile(`^//\s*title:\s*(.*?)\s*$`)

// Plugins lists the built-in panels in order, then one entry per *.js file directly in
// pluginsDir (sorted by name). An operator plugin's title is taken from a first line
// `// title: X`, else its id. An operator plugin whose id would clash with another gets the
// prefix "ext-". Files whose name starts with "_" are served but not listed: modules that
// plugins import. A missing or unreadable folder yields the built-ins alone.
func Plugins(pluginsDir string) []Plugin {
	out := make([]Plugin, 0, len(builtins))
	taken := map[string]bool{}
	for _, b := range builtins {
		b.Module = Prefix + "/plugins/" + b.ID + ".js"
		out = append(out, b)
		taken[b.ID] = true
	}
	if pluginsDir == "" {
		return out
	}
	entries, err := os.ReadDir(pluginsDir)
	if err != nil {
		return out
	}
	root, err := os.OpenRoot(pluginsDir)
	if err != nil {
		return out
	}
	defer root.Close()
	for _, e := range entries {
		name := e.Name()
		if !pluginFile.MatchString(name) || strings.HasPrefix(name, "_") {
			continue
		}
		info, err := root.Stat(name)
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		id := strings.TrimSuffix(name, ".js")
		for taken[id] {
			id = "ext-" + id
		}
		taken[id] = true
		title := cmp.Or(readTitle(root, name), id)
		out = append(out, Plugin{ID: id, Title: title, Module: Prefix + "/ext/" + name})
	}
	return out
}

// readTitle returns X from a first line `// title: X`, or "".
func readTitle(root *os.Root, name string) string {
	f, err := root.Open(name)
	if err != nil {
		return ""
	}
	defer f.Close()
	line, err := bufio.NewReader(io.LimitReader(f, 1024)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return ""
	}
	line = strings.TrimPrefix(line, "\ufeff")
	m := titleLine.FindStringSubmatch(strings.TrimRight(line, "\r\n"))
	if m == nil {
		return ""
	}
	title := m[1]
	if r := []rune(title); len(r) > 80 {
		title = string(r[:80])
	}
	return title
}

// asset is one embedded file, read once at start.
type asset struct {
	body  []byte
	etag  string
	ctype string
}

type handler struct {
	assets     map[string]*asset
	pluginsDir string
}

// Handler serves the SPA under /admin/ (requests arrive with the prefix): files from the
// embedded dist folder, operator plugins from pluginsDir at /admin/ext/<name>.js, and
// index.html for any other path without a file extension (client-side routes).
func Handler(pluginsDir string) http.Handler {
	sub, err := fs.Sub(embedded, "dist")
	if err != nil {
		panic(err)
	}
	h := &handler{assets: map[string]*asset{}, pluginsDir: pluginsDir}
	err = fs.WalkDir(sub, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := fs.ReadFile(sub, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		h.assets[p] = &asset{body: body, etag: `"` + hex.EncodeToString(sum[:12]) + `"`, ctype: contentType(p)}
		return nil
	})
	if err != nil {
		panic(err)
	}
	if h.assets["index.html"] == nil {
		panic("frontend: dist/index.html is missing")
	}
	return h
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", ContentSecurityPolicy)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")

	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hd.Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	p := r.URL.Path
	var rel string
	switch {
	case p == Prefix:
		rel = ""
	case strings.HasPrefix(p, Prefix+"/"):
		rel = strings.TrimPrefix(p, Prefix+"/")
	default:
		http.NotFound(w, r)
		return
	}
	// The decoded path must be clean: no "." or ".." element, no backslash, no NUL, no
	// empty element. %2e%2e and %2f arrive here decoded, so they are caught too.
	if !cleanRel(rel) {
		http.NotFound(w, r)
		return
	}

	if name, ok := strings.CutPrefix(rel, "ext/"); ok && path.Ext(strings.TrimSuffix(name, "/")) != "" {
		h.serveExt(w, r, name)
		return
	}
	rel = cmp.Or(rel, "index.html")
	if a := h.assets[rel]; a != nil {
		h.serveAsset(w, r, rel, a)
		return
	}
	if path.Ext(strings.TrimSuffix(rel, "/")) != "" {
		http.NotFound(w, r)
		return
	}
	h.serveAsset(w, r, "index.html", h.assets["index.html"])
}

func cleanRel(rel string) bool {
	if rel == "" {
		return true
	}
	if strings.ContainsAny(rel, "\\\x00") {
		return false
	}
	return !slices.ContainsFunc(strings.Split(strings.TrimSuffix(rel, "/"), "/"), func(el string) bool { return el == "" || el == "." || el == ".." })
}

func (h *handler) serveAsset(w http.ResponseWriter, r *http.Request, name string, a *asset) {
	hd := w.Header()
	hd.Set("Content-Type", a.ctype)
	hd.Set("Cache-Control", "no-cache")
	hd.Set("ETag", a.etag)
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(a.body))
}

// serveExt serves one operator plugin module: a *.js file directly in the plugins folder,
// opened through os.Root so that no symlink or path leads out of it.
func (h *handler) serveExt(w http.ResponseWriter, r *http.Request, name string) {
	if h.pluginsDir == "" || !pluginFile.MatchString(name) {
		http.NotFound(w, r)
		return
	}
	f, err := os.OpenInRoot(h.pluginsDir, name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil || !info.Mode().IsRegular() {
		http.NotFound(w, r)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "text/javascript; charset=utf-8")
	hd.Set("Cache-Control", "no-cache")
	http.ServeContent(w, r, name, info.ModTime(), f)
}

// contentTypes are the embedded files' types by extension; any other is served as plain text.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".mjs": "text/javascript; charset=utf-8",
	".css": "text/css; charset=utf-8", ".svg": "image/svg+xml", ".png": "image/png", ".ico": "image/x-icon",
	".json": "application/json", ".map": "application/json", ".woff2": "font/woff2",
}

func contentType(name string) string {
	return cmp.Or(contentTypes[path.Ext(name)], "text/plain; charset=utf-8")
}
