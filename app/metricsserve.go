package app

import (
	"crypto/subtle"
	"net"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metricsHandler serves the registry; with OWED_METRICS_TOKEN set, only to a request bearing
// it (401 otherwise, in the API's error shape).
func (a *App) metricsHandler() echo.HandlerFunc {
	prom := echo.WrapHandler(promhttp.HandlerFor(a.Metrics.Registry, promhttp.HandlerOpts{}))
	token := []byte(a.Config.MetricsToken)
	return func(c echo.Context) error {
		if len(token) > 0 {
			got, ok := strings.CutPrefix(c.Request().Header.Get(echo.HeaderAuthorization), "Bearer ")
			if !ok || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), token) != 1 {
				c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="owed metrics"`)
				return echo.NewHTTPError(http.StatusUnauthorized, "the metrics bearer token (OWED_METRICS_TOKEN) is required")
			}
		}
		return prom(c)
	}
}

// newMetricsEcho is the handler of OWED_METRICS_ADDR's listener: /metrics and nothing else.
func (a *App) newMetricsEcho() *echo.Echo {
	e := a.baseEcho()
	e.GET("/metrics", a.metricsHandler())
	return e
}

// serveMetrics opens OWED_METRICS_ADDR's listener, when set, and serves /metrics on it.
func (a *App) serveMetrics() error {
	if a.Config.MetricsAddr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", a.Config.MetricsAddr)
	if err != nil {
		return err
	}
	a.metricsServer = a.timeouts.server(a.newMetricsEcho())
	a.metricsAddr = ln.Addr().String()
	go a.serveOn(a.metricsServer, ln, "/metrics")
	a.Log.Info("owed metrics serving", "addr", a.metricsAddr)
	return nil
}
