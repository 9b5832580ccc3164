//go:build !etabefore

package main

import (
	"time"

	"github.com/owed/owed/app"
)

// appOptions are the owed options for a rate model: "plain" (every row of a run over all its
// running time), "ewma" (the smoothed recent rate with the window), or "default" (owed's own
// choice).
func appOptions(model string, window time.Duration) app.Options {
	var o app.Options
	switch model {
	case "plain":
		o.BackfillRateWindow = -1
	case "ewma":
		o.BackfillRateWindow = window
	}
	return o
}
