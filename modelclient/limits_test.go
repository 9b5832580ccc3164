package modelclient_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/owed/owed/modelclient"
)

func TestCheckScreen(t *testing.T) {
	t.Parallel()
	title := func(n int) string { return strings.Repeat("é", n) } // two bytes a character
	for _, tc := range []struct {
		name     string
		req      modelclient.ScreenRequest
		field    string // "" when accepted
		tooLarge bool
	}{
		{"revision at limits", modelclient.ScreenRequest{Kind: "revision", Subject: modelclient.Subject{Title: title(200), Text: strings.Repeat("c", 64<<10)}}, "", false},
		{"revision code over", modelclient.ScreenRequest{Kind: "revision", Subject: modelclient.Subject{Title: "t", Text: strings.Repeat("c", 64<<10+1)}}, "code", true},
		{"revision title over", modelclient.ScreenRequest{Kind: "revision", Subject: modelclient.Subject{Title: title(201), Text: "c"}}, "title", false},
		{"comment at limit", modelclient.ScreenRequest{Kind: "comment", Subject: modelclient.Subject{Text: strings.Repeat("b", 8<<10)}}, "", false},
		{"comment over", modelclient.ScreenRequest{Kind: "comment", Subject: modelclient.Subject{Text: strings.Repeat("b", 8<<10+1)}}, "body", true},
		{"pitch at limit", modelclient.ScreenRequest{Kind: "pitch", Subject: modelclient.Subject{Text: strings.Repeat("b", 8<<10)}}, "", false},
		{"pitch over", modelclient.ScreenRequest{Kind: "pitch", Subject: modelclient.Subject{Text: strings.Repeat("b", 8<<10+1)}}, "body", true},
		{"pitch code-sized", modelclient.ScreenRequest{Kind: "pitch", Subject: modelclient.Subject{Text: strings.Repeat("b", 64<<10)}}, "body", true},
		{"empty revision", modelclient.ScreenRequest{Kind: "revision"}, "", false},
		{"unknown kind", modelclient.ScreenRequest{Kind: "song", Subject: modelclient.Subject{Text: "x"}}, "kind", false},
		{"no kind", modelclient.ScreenRequest{}, "kind", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkLimit(t, modelclient.CheckScreen(tc.req), tc.field, tc.tooLarge)
		})
	}
}

func TestCheckScore(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		req      modelclient.ScoreRequest
		field    string
		tooLarge bool
	}{
		{"at limits", modelclient.ScoreRequest{Title: strings.Repeat("ж", 200), Code: strings.Repeat("c", 64<<10), Spec: strings.Repeat("s", 128<<10)}, "", false},
		{"code over", modelclient.ScoreRequest{Title: "t", Code: strings.Repeat("c", 64<<10+1)}, "code", true},
		{"title over", modelclient.ScoreRequest{Title: strings.Repeat("t", 201), Code: "c"}, "title", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkLimit(t, modelclient.CheckScore(tc.req), tc.field, tc.tooLarge)
		})
	}
}

func checkLimit(t *testing.T, err error, field string, tooLarge bool) {
	t.Helper()
	if field == "" {
		if err != nil {
			t.Fatalf("refused: %v", err)
		}
		return
	}
	var le *modelclient.LimitError
	if !errors.As(err, &le) {
		t.Fatalf("err = %v, want a *LimitError", err)
	}
	if le.Field != field || le.TooLarge() != tooLarge || le.Message == "" || le.Error() != le.Message {
		t.Errorf("err = %+v (TooLarge %v), want field %q, TooLarge %v", le, le.TooLarge(), field, tooLarge)
	}
	if field != "kind" && le.Limit == 0 {
		t.Errorf("no limit in %+v", le)
	}
}
