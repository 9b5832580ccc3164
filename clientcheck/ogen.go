package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/ogen-go/ogen/ogenerrors"

	"github.com/owed/owed/clientcheck/internal/serve"
	o "github.com/owed/owed/clientcheck/ogenclient"
)

// token is ogen's security source: the bearer token, never a session cookie.
type token string

func (t token) Bearer(context.Context, o.OperationName) (o.Bearer, error) {
	return o.Bearer{Token: string(t)}, nil
}

func (token) SessionCookie(context.Context, o.OperationName) (o.SessionCookie, error) {
	return o.SessionCookie{}, ogenerrors.ErrSkipClientSecurity
}

func ogenClient(url, tok string) *o.Client {
	cl, err := o.NewClient(url, token(tok))
	if err != nil {
		panic(stepError{"ogen client", err})
	}
	return cl
}

// want is an ogen answer of type *T (the type ogen returns for the status wanted): any other
// answer, or an error (ogen's own decoding and validation of the answer), fails the step.
func want[T any](step string) func(res any, err error) *T {
	return func(res any, err error) *T {
		if err != nil {
			panic(stepError{step, err})
		}
		v, ok := res.(*T)
		if !ok {
			panic(stepError{step, fmt.Errorf("answered %T %+v, want %T", res, res, v)})
		}
		return v
	}
}

// walkOgen is walk with ogen's client, as another author ("cat") with a webhook of its own.
func walkOgen(srv *serve.Owed, rcv *receiver) {
	ctx := context.Background()
	admin := ogenClient(srv.URL, srv.AdminToken)

	cat := want[o.UserCreatedHeaders]("ogen: create an author")(admin.PostAdminUsers(ctx, &o.UserRequest{Name: "cat", Role: o.UserRequestRoleAuthor},
		o.PostAdminUsersParams{IdempotencyKey: o.NewOptString("clientcheck-cat")})).Response
	check("ogen: create an author", cat.Token != "" && cat.Role == o.UserCreatedRoleAuthor, "answered %+v", cat)
	dup := want[o.ErrorHeaders]("ogen: a name taken in another case")(admin.PostAdminUsers(ctx, &o.UserRequest{Name: "CAT", Role: o.UserRequestRoleAuthor}, o.PostAdminUsersParams{}))
	check("ogen: a name taken in another case", dup.Response.Error.Code == o.ErrorDetailCodeConflict, "code %q", dup.Response.Error.Code)
	author := ogenClient(srv.URL, cat.Token)

	hookURL, _ := url.Parse(rcv.url)
	hook := want[o.WebhookCreatedHeaders]("ogen: subscribe a webhook")(admin.PostAdminWebhooks(ctx,
		&o.WebhookRequest{URL: *hookURL, Events: []o.WebhookRequestEventsItem{o.WebhookRequestEventsItem_itemDotscreened}}, o.PostAdminWebhooksParams{})).Response

	song := want[o.SongCreatedHeaders]("ogen: publish")(author.PostListenersSongs(ctx, &o.SongRequest{Title: "Swell", Code: `s("bd hh")`}, o.PostListenersSongsParams{})).Response
	check("ogen: publish", song.Screen.State == o.ScreenStatePending, "screen %+v", song.Screen)

	mine := want[o.MineHeaders]("ogen: mine")(author.GetListenersMine(ctx, o.GetListenersMineParams{}))
	etag := mine.ETag.Or("")
	check("ogen: mine", len(mine.Response.Items) == 1 && etag != "", "items %d, ETag %q", len(mine.Response.Items), etag)
	want[o.GetListenersMineNotModified]("ogen: mine's 304")(author.GetListenersMine(ctx, o.GetListenersMineParams{IfNoneMatch: o.NewOptString(etag)}))
	began := time.Now()
	want[o.GetListenersMineNotModified]("ogen: a long poll that runs out")(author.GetListenersMine(ctx,
		o.GetListenersMineParams{IfNoneMatch: o.NewOptString(etag), Wait: o.NewOptInt(1)}))
	check("ogen: a long poll that runs out", time.Since(began) >= 900*time.Millisecond, "answered after %s, want the wait", time.Since(began))

	// The stream: the document marks it raw for ogen, so the call answers at the headers with
	// the response, whose events the caller reads.
	streamCtx, stop := context.WithTimeout(ctx, 10*time.Second)
	raw := want[o.GetListenersMineStreamOKRawTextEventStream]("ogen: stream")(author.GetListenersMineStream(streamCtx, o.GetListenersMineStreamParams{}))
	check("ogen: stream", strings.HasPrefix(raw.Response.Header.Get("Content-Type"), "text/event-stream"), "Content-Type %q", raw.Response.Header.Get("Content-Type"))
	event, id, data := firstEvent("ogen: stream", raw.Response.Body)
	stop()
	check("ogen: stream", event == "mine" && id == etag, "event %q id %q, want mine %s", event, id, etag)
	var streamed o.Mine
	if err := json.Unmarshal([]byte(data), &streamed); err != nil || streamed.Validate() != nil || len(streamed.Items) != 1 {
		panic(stepError{"ogen: stream's event", fmt.Errorf("%v %v: %s", err, streamed.Validate(), data)})
	}

	jobs := want[o.JobList]("ogen: admin jobs")(admin.GetAdminJobs(ctx, o.GetAdminJobsParams{Author: o.NewOptString("cat")}))
	check("ogen: admin jobs", len(jobs.Jobs) == 1 && jobs.Total == 1, "jobs %+v", jobs)
	want[o.JobDetail]("ogen: admin job")(admin.GetAdminJobsId(ctx, o.GetAdminJobsIdParams{ID: jobs.Jobs[0].ID}))
	held := want[o.HoldsHeaders]("ogen: hold")(admin.PutAdminHolds(ctx, &o.HoldsRequest{Screen: o.NewOptBool(true)}, o.PutAdminHoldsParams{}))
	check("ogen: hold", held.Response.Screen, "holds %+v", held.Response)
	want[o.RetriedHeaders]("ogen: retry")(admin.PostAdminJobsRetry(ctx, &o.JobFilterRequest{Author: o.NewOptString("cat")}, o.PostAdminJobsRetryParams{}))
	want[o.HoldsHeaders]("ogen: lift")(admin.PutAdminHolds(ctx, &o.HoldsRequest{Screen: o.NewOptBool(false)}, o.PutAdminHoldsParams{}))

	decide := func(step string, kind o.PostAdminItemsKindIdVerdictKind, id int) {
		want[o.ScreenHeaders](step)(admin.PostAdminItemsKindIdVerdict(ctx, &o.VerdictRequest{Verdict: o.VerdictRequestVerdictAllow},
			o.PostAdminItemsKindIdVerdictParams{Kind: kind, ID: id}))
	}
	decide("ogen: verdict", o.PostAdminItemsKindIdVerdictKindRevision, song.Revision.ID)
	changed := want[o.MineHeaders]("ogen: a long poll after the verdict")(author.GetListenersMine(ctx,
		o.GetListenersMineParams{IfNoneMatch: o.NewOptString(etag), Wait: o.NewOptInt(10)}))
	check("ogen: a long poll after the verdict", len(changed.Response.Items) == 1 && changed.Response.Items[0].State == o.MineItemStatePublic,
		"items %+v", changed.Response.Items)

	h, body := rcv.await("ogen: the verdict's delivery", 0)
	check("ogen: the verdict's delivery", verifies(hook.Secret, h, body), "does not verify with the secret")
	rotated := want[o.WebhookSecretHeaders]("ogen: rotate the webhook's secret")(admin.PostAdminWebhooksIdSecret(ctx,
		o.PostAdminWebhooksIdSecretParams{ID: hook.Webhook.ID})).Response
	pitch := want[o.PitchCreatedHeaders]("ogen: pitch")(author.PostListenersPitches(ctx, &o.BodyRequest{Body: "a second thought"}, o.PostListenersPitchesParams{})).Response
	decide("ogen: the pitch's verdict", o.PostAdminItemsKindIdVerdictKindPitch, pitch.Pitch.ID)
	h, body = rcv.await("ogen: the delivery after the rotation", 1)
	check("ogen: the delivery after the rotation", verifies(hook.Secret, h, body) && verifies(rotated.Secret, h, body),
		"signatures %q: want the old and the new secret to verify", h.Get("webhook-signature"))
	deliveries := want[o.DeliveryList]("ogen: deliveries")(admin.GetAdminWebhooksIdDeliveries(ctx, o.GetAdminWebhooksIdDeliveriesParams{ID: hook.Webhook.ID}))
	check("ogen: deliveries", len(deliveries.Deliveries) == 2, "deliveries %d", len(deliveries.Deliveries))
	want[o.DeliveryAnswer]("ogen: one delivery")(admin.GetAdminDeliveriesId(ctx, o.GetAdminDeliveriesIdParams{ID: deliveries.Deliveries[0].ID}))

	fresh := want[o.UserCreatedHeaders]("ogen: rotate cat's token")(admin.PostAdminUsersIdToken(ctx, o.PostAdminUsersIdTokenParams{ID: cat.ID})).Response
	gone := want[o.GetListenersMineUnauthorized]("ogen: the old token")(author.GetListenersMine(ctx, o.GetListenersMineParams{}))
	check("ogen: the old token", gone.Error.Code == o.ErrorDetailCodeUnauthorized, "code %q", gone.Error.Code)
	want[o.MineHeaders]("ogen: the new token")(ogenClient(srv.URL, fresh.Token).GetListenersMine(ctx, o.GetListenersMineParams{}))
}
