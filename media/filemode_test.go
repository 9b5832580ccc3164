package media

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

// TestPreviewFilesArePrivate (issue 23): the preview folder, its shards and every preview are
// the owner's alone (0700, 0600), whatever the umask.
func TestPreviewFilesArePrivate(t *testing.T) {
	clock := newFakeClock()
	c := newCDN(t, clock, map[string]http.HandlerFunc{"/a.png": serveBytes("image/png", pngBytes(t, 64, 48))})
	e := newTestEngine(t, clock)
	if res := e.Preview(context.Background(), image1(5, c.url("/a.png"))); res.Outcome != Cached {
		t.Fatalf("outcome %q (%s), want cached", res.Outcome, res.Err)
	}
	for path, want := range map[string]os.FileMode{e.cfg.PreviewDir: 0o700, filepath.Dir(e.PreviewPath(5)): 0o700, e.PreviewPath(5): 0o600} {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Mode().Perm(); got != want {
			t.Errorf("%s is %04o, want %04o", path, got, want)
		}
	}
}
