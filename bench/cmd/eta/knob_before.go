//go:build etabefore

package main

import (
	"fmt"
	"os"
	"time"

	"github.com/owed/owed/app"
)

// appOptions, built with -tags etabefore against owed before issue 13 (which has no rate
// models to choose from), takes owed's only one.
func appOptions(model string, _ time.Duration) app.Options {
	if model != "default" {
		fmt.Fprintln(os.Stderr, "eta: -rate is ignored by the build before issue 13")
	}
	return app.Options{}
}
