package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/owed/owed/app"
	"github.com/owed/owed/models"
)

// TestLogFormatAndGORMThroughSlog: OWED_LOG_FORMAT picks JSON or text (JSON when unset and not
// a terminal); the store's failed statements reach the same logger, without their parameters.
func TestLogFormatAndGORMThroughSlog(t *testing.T) {
	for format, isJSON := range map[string]bool{"json": true, "text": false, "": true} {
		c := app.Defaults()
		c.LogFormat = format
		var buf bytes.Buffer
		app.NewLogger(c, &buf).Info("hello", "n", 1)
		var v map[string]any
		if got := json.Unmarshal(buf.Bytes(), &v) == nil; got != isJSON {
			t.Errorf("format %q wrote %q; JSON=%v, want %v", format, buf.String(), got, isJSON)
		}
		if !isJSON && !strings.Contains(buf.String(), "msg=hello") {
			t.Errorf("text format wrote %q", buf.String())
		}
	}
	c := app.Defaults()
	c.LogLevel = 0
	var buf bytes.Buffer
	log := app.NewLogger(c, &buf)
	store, err := models.Open(context.Background(), models.Options{URL: "sqlite:" + t.TempDir() + "/owed.db", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	buf.Reset()
	store.RawExec(context.Background(), `SELECT * FROM no_such_table WHERE secret = ?`, "hunter2")
	out := buf.String()
	if !strings.Contains(out, `"level":"ERROR"`) || !strings.Contains(out, "no_such_table") {
		t.Errorf("a failed statement was not logged at error: %q", out)
	}
	if strings.Contains(out, "hunter2") {
		t.Errorf("the log shows a statement's parameter: %q", out)
	}
}
