// Command gen makes the two Go clients from the document a real owed serves: it starts owed,
// saves /api/openapi.json as owedclient/openapi.json and runs on it the pinned oapi-codegen
// (owedclient) and ogen with its default options (ogenclient), both go.mod's tool lines. Run
// it from clientcheck/: go run ./cmd/gen (before building clientcheck: the ogen client is not kept
// in git, and its go.mod lists what that client imports)
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
	for _, tool := range [][]string{
		{"oapi-codegen", "-config", "oapi-codegen.yaml", "owedclient/openapi.json"},
		{"ogen", "-target", "ogenclient", "-package", "ogenclient", "-clean", "-loglevel", "warn", "owedclient/openapi.json"},
	} {
		gen := exec.Command("go", append([]string{"tool"}, tool...)...)
		gen.Stdout, gen.Stderr = os.Stdout, os.Stderr
		if err := gen.Run(); err != nil {
			return fmt.Errorf("%s: %w", tool[0], err)
		}
	}
	fmt.Println("clientcheck gen: owedclient (oapi-codegen) and ogenclient (ogen) made from the served document")
	return nil
}
