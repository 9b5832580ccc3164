package app_test

import (
	"strings"
	"testing"
	"time"

	"github.com/owed/owed/app"
)

// TestDriftSettings: OWED_DRIFT_EVERY defaults to a day and OWED_DRIFT_ALERT to 0.9; good values
// are read, and bad ones stop owed with a message naming the variable.
func TestDriftSettings(t *testing.T) {
	c, err := app.FromEnv(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.DriftEvery != 24*time.Hour || c.DriftAlert != 0.9 {
		t.Errorf("defaults: every %s alert %v, want 24h and 0.9", c.DriftEvery, c.DriftAlert)
	}
	c, err = app.FromEnv(env(map[string]string{"OWED_DRIFT_EVERY": "90m", "OWED_DRIFT_ALERT": " 1 "}))
	if err != nil || c.DriftEvery != 90*time.Minute || c.DriftAlert != 1 {
		t.Errorf("90m and 1: every %s alert %v, err %v", c.DriftEvery, c.DriftAlert, err)
	}
	for _, bad := range []struct{ name, value string }{
		{"OWED_DRIFT_EVERY", "daily"},
		{"OWED_DRIFT_EVERY", "30s"}, // under a minute: a typo, and a run asks the model about every anchor
		{"OWED_DRIFT_EVERY", "0"},
		{"OWED_DRIFT_ALERT", "0"}, // nothing could ever fall below it
		{"OWED_DRIFT_ALERT", "1.1"},
		{"OWED_DRIFT_ALERT", "-0.5"},
		{"OWED_DRIFT_ALERT", "NaN"},
		{"OWED_DRIFT_ALERT", "most"},
	} {
		_, err := app.FromEnv(env(map[string]string{bad.name: bad.value}))
		if err == nil || !strings.Contains(err.Error(), bad.name) {
			t.Errorf("%s=%q: error %v, want one naming the variable", bad.name, bad.value, err)
		}
	}
}
