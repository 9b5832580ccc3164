// Command gen makes owedclient from the document a real owed serves: it starts owed, saves
// /api/openapi.json as owedclient/openapi.json and runs the pinned oapi-codegen (go.mod's tool
// line) on it. Run it from clientcheck/: go run ./cmd/gen
package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"

	"github.com/owed/owed/clientcheck/internal/serve"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "clientcheck gen:", err)
		os.Exit(1)
	}
}

func run() error {
	o, err := serve.Start()
	if err != nil {
		return err
	}
	defer o.Stop()
	res, err := http.Get(o.URL + "/api/openapi.json")
	if err != nil {
		return err
	}
	defer res.Body.Close()
	doc, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /api/openapi.json: %d %v", res.StatusCode, err)
	}
	if err := os.WriteFile("owedclient/openapi.json", doc, 0o644); err != nil {
		return err
	}
	gen := exec.Command("go", "tool", "oapi-codegen", "-config", "oapi-codegen.yaml", "owedclient/openapi.json")
	gen.Stdout, gen.Stderr = os.Stdout, os.Stderr
	if err := gen.Run(); err != nil {
		return fmt.Errorf("oapi-codegen: %w", err)
	}
	fmt.Println("clientcheck gen: owedclient/client.gen.go made from the served document")
	return nil
}
