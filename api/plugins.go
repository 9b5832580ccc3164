package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/owed/owed/frontend"
)

// pluginsJSON is the SPA's plugin manifest.
type pluginsJSON struct {
	Plugins []pluginJSON `json:"plugins"`
}

type pluginJSON struct {
	ID     string `json:"id"`
	Title  string `json:"title"`
	Module string `json:"module"`
}

// plugins is the SPA's manifest: the built-in panels, then the operator's own modules.
func (a *API) plugins(c echo.Context) error {
	ps := frontend.Plugins(a.PluginsDir)
	return c.JSON(http.StatusOK, pluginsJSON{Plugins: each(ps, func(p frontend.Plugin) pluginJSON { return pluginJSON(p) })})
}
