// Package serve builds owed from the repository around this module and starts it as a real
// `owed serve` on a free port, with a data folder of its own.
package serve

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// Owed is a running owed.
type Owed struct {
	URL        string // http://127.0.0.1:PORT
	AdminToken string
	cmd        *exec.Cmd
	dir        string
}

// Start builds ../cmd/owed and serves it with extra environment variables (NAME=value).
func Start(extra ...string) (*Owed, error) {
	dir, err := os.MkdirTemp("", "owed-clientcheck-")
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(dir, "owed")
	build := exec.Command("go", "build", "-o", bin, "./cmd/owed")
	build.Dir = ".."
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("build owed: %w", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	b := make([]byte, 24)
	rand.Read(b)
	o := &Owed{URL: "http://" + addr, AdminToken: "owed_" + hex.EncodeToString(b), dir: dir}
	o.cmd = exec.Command(bin, "serve")
	o.cmd.Env = append(os.Environ(), "OWED_ADDR="+addr, "OWED_DATA_DIR="+filepath.Join(dir, "data"),
		"OWED_ADMIN_TOKEN="+o.AdminToken, "OWED_LOG_LEVEL=warn", "OWED_DATABASE_URL=")
	o.cmd.Env = append(o.cmd.Env, extra...)
	o.cmd.Stdout, o.cmd.Stderr = os.Stderr, os.Stderr
	if err := o.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if r, err := http.Get(o.URL + "/readyz"); err == nil {
			r.Body.Close()
			if r.StatusCode == http.StatusOK {
				return o, nil
			}
		}
	}
	o.Stop()
	return nil, fmt.Errorf("owed did not become ready at %s", o.URL)
}

// Stop ends owed and removes its folder.
func (o *Owed) Stop() {
	if o.cmd.Process != nil {
		o.cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { o.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			o.cmd.Process.Kill()
			<-done
		}
	}
	os.RemoveAll(o.dir)
}
