package api

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
)

// secretAnswer reports whether the route a request is for answers with a token or a secret, or
// sets one as a cookie (the API tests fail any such answer that lacks no-store).
func secretAnswer(method, path string) bool {
	path = strings.TrimSuffix(path, "/")
	switch {
	case path == "/api/session":
		return true
	case method == http.MethodPost && (path == "/api/admin/users" || path == "/api/admin/webhooks"):
		return true
	case method == http.MethodPost && strings.HasPrefix(path, "/api/admin/users/") && strings.HasSuffix(path, "/token"):
		return true
	}
	return false
}

// noStore puts Cache-Control: no-store on every answer of a secretAnswer route, errors and
// replays included (it runs before routing).
func noStore(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if secretAnswer(c.Request().Method, c.Request().URL.Path) {
			c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
		}
		return next(c)
	}
}
