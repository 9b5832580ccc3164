package api

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestErrorCodesListed: every error code this package writes (an Error's Code, or one of
// statusCodes) is in errorCodes, so Error.code's enum in the document lists every code a client
// can get, and every code routeErrors names is one.
func TestErrorCodesListed(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	found := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		check := func(lit ast.Expr) {
			if b, ok := lit.(*ast.BasicLit); ok && b.Kind == token.STRING {
				code, _ := strconv.Unquote(b.Value)
				found++
				if !slices.Contains(errorCodes, code) {
					t.Errorf("%s: the code %q is not in errorCodes (api/openapi_errors.go)", fset.Position(b.Pos()), code)
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CompositeLit:
				if id, ok := n.Type.(*ast.Ident); ok && id.Name == "Error" {
					for _, e := range n.Elts {
						if kv, ok := e.(*ast.KeyValueExpr); ok && kv.Key.(*ast.Ident).Name == "Code" {
							check(kv.Value)
						}
					}
				}
			}
			return true
		})
	}
	for status, code := range statusCodes {
		if !slices.Contains(errorCodes, code) {
			t.Errorf("statusCodes[%d]: the code %q is not in errorCodes (api/openapi_errors.go)", status, code)
		}
	}
	if !slices.Contains(errorCodes, "error") {
		t.Error(`the code "error" of a status statusCodes does not name is not in errorCodes`)
	}
	if found < 30 {
		t.Fatalf("found %d codes written: the scan misses them", found)
	}
	for route, answers := range routeErrors {
		for status, codes := range answers {
			for _, c := range codes {
				if !slices.Contains(errorCodes, c) {
					t.Errorf("routeErrors[%s][%d]: %q is no code", route, status, c)
				}
			}
		}
	}
}
