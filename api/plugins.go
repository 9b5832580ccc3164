package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/owed/owed/frontend"
)

// plugins is the SPA's manifest: the built-in panels, then the operator's own modules.
func (a *API) plugins(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]any{"plugins": frontend.Plugins(a.PluginsDir)})
}
