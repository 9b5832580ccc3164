package app_test

import (
	"strings"
	"testing"

	"github.com/owed/owed/app"
	"github.com/owed/owed/models"
)

// The review band: off by default; each kind takes OWED_REVIEW_BELOW unless set itself (0
// included); anything but a confidence from 0 to 1 stops owed naming the variable.
func TestReviewBandSettings(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	c, err := app.FromEnv(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range models.Kinds {
		if b := c.ReviewBand()[k]; b != 0 {
			t.Errorf("default band of %s = %v, want 0 (off)", k, b)
		}
	}
	c, err = app.FromEnv(env(map[string]string{"OWED_REVIEW_BELOW": "0.8", "OWED_REVIEW_BELOW_COMMENT": "0.5", "OWED_REVIEW_BELOW_PITCH": "0"}))
	if err != nil {
		t.Fatal(err)
	}
	want := map[models.Kind]float64{models.KindRevision: 0.8, models.KindComment: 0.5, models.KindPitch: 0}
	for k, v := range want {
		if b := c.ReviewBand()[k]; b != v {
			t.Errorf("band of %s = %v, want %v", k, b, v)
		}
	}
	for _, bad := range []string{"-0.1", "1.5", "x", "NaN"} {
		_, err := app.FromEnv(env(map[string]string{"OWED_REVIEW_BELOW_REVISION": bad}))
		if err == nil || !strings.Contains(err.Error(), "OWED_REVIEW_BELOW_REVISION") {
			t.Errorf("OWED_REVIEW_BELOW_REVISION=%s: %v, want an error naming it", bad, err)
		}
	}
}
