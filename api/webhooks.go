package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/owed/owed/models"
	"github.com/owed/owed/webhooks"
)

type webhookJSON struct {
	ID     int64    `json:"id"`
	URL    string   `json:"url"`
	Events []string `json:"events" enum:"webhookEvent"`
	Active bool     `json:"active"`
	// DisabledReason is null while active; "admin" or "gone" (the receiver answered 410).
	DisabledReason *string   `json:"disabledReason" enum:"disabledReason"`
	CreatedAt      timestamp `json:"createdAt"`
	Failing        bool      `json:"failing" description:"the newest attempted delivery is not delivered (the list only)"`
	LastStatus     *int      `json:"lastStatus"`
	LastError      *string   `json:"lastError"`
}

var disabledReasons = []string{models.DisabledByAdmin, models.DisabledGone}

// The answers about webhooks (keys in the order a map of them had).
type (
	webhookCreatedJSON struct {
		Secret  string      `json:"secret" pattern:"^whsec_" description:"the signing secret, shown only now"`
		Webhook webhookJSON `json:"webhook"`
	}
	webhookAnswerJSON struct {
		Webhook webhookJSON `json:"webhook"`
	}
	webhookListJSON struct {
		NextCursor *string       `json:"nextCursor"`
		Webhooks   []webhookJSON `json:"webhooks"`
	}
	deliveryAnswerJSON struct {
		Delivery deliveryJSON `json:"delivery"`
	}
	deliveryListJSON struct {
		Deliveries []deliveryJSON `json:"deliveries"`
		NextCursor *string        `json:"nextCursor"`
	}
)

// deliveriesQuery are the query parameters of a webhook's deliveries.
type deliveriesQuery struct {
	Status models.DeliveryStatus `query:"status" enum:"deliveryStatus"`
	pageQuery
}

func webhookOf(w models.Webhook) webhookJSON {
	events := w.Events
	if events == nil {
		events = []string{}
	}
	return webhookJSON{ID: w.ID, URL: w.URL, Events: events, Active: w.Active, DisabledReason: w.DisabledReason, CreatedAt: timeStr(w.CreatedAt)}
}

type deliveryAttemptJSON struct {
	Attempt   int       `json:"attempt"`
	At        timestamp `json:"at"`
	Status    *int      `json:"status"`
	LatencyMs int64     `json:"latencyMs"`
	Error     *string   `json:"error"`
}

type deliveryJSON struct {
	ID            int64                 `json:"id"`
	WebhookID     int64                 `json:"webhookId"`
	MessageID     string                `json:"messageId"`
	Event         string                `json:"event" enum:"webhookEvent"`
	Status        models.DeliveryStatus `json:"status" enum:"deliveryStatus"`
	Attempts      int                   `json:"attempts"`
	LastStatus    *int                  `json:"lastStatus"`
	LastError     *string               `json:"lastError"`
	NextAttemptAt *timestamp            `json:"nextAttemptAt"`
	DeliveredAt   *timestamp            `json:"deliveredAt"`
	CreatedAt     timestamp             `json:"createdAt"`
	AttemptLog    []deliveryAttemptJSON `json:"attemptLog"`
	Payload       json.RawMessage       `json:"payload,omitempty" description:"the body sent (one delivery's own route only)"`
}

func deliveryOf(d models.Delivery, attempts []models.DeliveryAttempt) deliveryJSON {
	out := deliveryJSON{ID: d.ID, WebhookID: d.WebhookID, MessageID: d.MsgID, Event: d.Event, Status: d.Status,
		Attempts: d.Attempts, LastStatus: d.LastStatus, LastError: d.LastError, DeliveredAt: timePtr(d.DeliveredAt),
		CreatedAt: timeStr(d.CreatedAt), AttemptLog: each(attempts, func(a models.DeliveryAttempt) deliveryAttemptJSON {
			return deliveryAttemptJSON{Attempt: a.Attempt, At: timeStr(a.At), Status: a.Status, LatencyMs: a.LatencyMs, Error: a.Error}
		})}
	if d.Status == models.DeliveryPending {
		out.NextAttemptAt = new(timeStr(d.DueAt))
	}
	if d.Payload != "" {
		out.Payload = json.RawMessage(d.Payload)
	}
	return out
}

// listedAttempts is how many of each delivery's latest attempts a list shows.
const listedAttempts = 20

type webhookRequest struct {
	URL    string   `json:"url" required:"true" format:"uri" description:"http or https; not a loopback or private address unless OWED_WEBHOOKS_ALLOW_PRIVATE"`
	Events []string `json:"events" required:"true" minItems:"1" enum:"webhookEvent"`
}

// checkEvents validates a subscription's events: at least one, each known; duplicates go.
func checkEvents(events []string) ([]string, error) {
	if len(events) == 0 {
		return nil, invalid("events", "events must name at least one of item.screened, song.scored, backfill.finished, model.breaker, item.appeal.decided, model.drift or *")
	}
	var out []string
	for _, e := range events {
		if !slices.Contains(models.WebhookEvents, e) {
			return nil, invalid("events", "events may hold only item.screened, song.scored, backfill.finished, model.breaker, item.appeal.decided, model.drift and *; not "+strconv.Quote(e))
		}
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return out, nil
}

// createWebhook subscribes a URL to events and shows its signing secret, once.
func (a *API) createWebhook(c echo.Context) error {
	var req webhookRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	ctx := c.Request().Context()
	url, err := webhooks.CheckURL(ctx, req.URL, a.WebhooksAllowPrivate, nil)
	if err != nil {
		var ue *webhooks.URLError
		if errors.As(err, &ue) {
			return invalid("url", ue.Msg)
		}
		return err
	}
	events, err := checkEvents(req.Events)
	if err != nil {
		return err
	}
	secret := webhooks.NewSecret()
	var w models.Webhook
	err = a.Store.WithTx(ctx, func(tx *models.Store) error {
		var err error
		if w, err = tx.CreateWebhook(ctx, url, events, secret); err != nil {
			return err
		}
		return audit(c, tx, models.AuditWebhookCreate, target("webhook", w.ID), nil, map[string]any{"url": w.URL, "events": events})
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, webhookCreatedJSON{Webhook: webhookOf(w), Secret: secret})
}

// listWebhooks pages through the subscriptions, oldest first.
func (a *API) listWebhooks(c echo.Context) error {
	limit, after, err := idPage(c, 100, 500)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	ws, err := a.Store.ListWebhooks(ctx, after, limit)
	if err != nil {
		return err
	}
	health, err := a.Store.WebhookHealths(ctx, each(ws, func(w models.Webhook) int64 { return w.ID }))
	if err != nil {
		return err
	}
	withHealth := func(w models.Webhook) webhookJSON {
		out := webhookOf(w)
		h := health[w.ID]
		out.Failing, out.LastStatus, out.LastError = h.Failing, h.LastStatus, h.LastError
		return out
	}
	out, next := pageOf(ws, limit, withHealth, func(w models.Webhook) any { return idCursor{w.ID} })
	return c.JSON(http.StatusOK, webhookListJSON{next, out})
}

type webhookUpdate struct {
	Active *bool `json:"active" required:"true"`
}

// updateWebhook enables (a 410-disabled one too) or disables a subscription, cancelling its pending.
func (a *API) updateWebhook(c echo.Context) error {
	var req webhookUpdate
	id, err := pathIDAndBody(c, &req)
	if err != nil {
		return err
	}
	if req.Active == nil {
		return invalid("active", "active is required: true or false")
	}
	var w models.Webhook
	err = a.Store.WithTx(c.Request().Context(), func(tx *models.Store) error {
		var err error
		if w, err = tx.SetWebhookActive(c.Request().Context(), id, *req.Active, models.DisabledByAdmin); err != nil {
			return err
		}
		return audit(c, tx, models.AuditWebhookUpdate, target("webhook", id), nil, map[string]any{"active": *req.Active})
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, webhookAnswerJSON{webhookOf(w)})
}

// deleteWebhook deletes a subscription with its deliveries and their attempts.
func (a *API) deleteWebhook(c echo.Context) error {
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	if err := a.Store.WithTx(c.Request().Context(), func(tx *models.Store) error {
		if err := tx.DeleteWebhook(c.Request().Context(), id); err != nil {
			return err
		}
		return audit(c, tx, models.AuditWebhookDelete, target("webhook", id), nil, nil)
	}); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// listDeliveries pages through a subscription's deliveries, newest first, with latest attempts.
func (a *API) listDeliveries(c echo.Context) error {
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	status, err := oneOf(c, "status", models.DeliveryStatuses...)
	if err != nil {
		return err
	}
	limit, before, err := idPage(c, 50, 200)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	if _, err := a.Store.WebhookByID(ctx, id); err != nil {
		return err
	}
	ds, err := a.Store.ListDeliveries(ctx, id, status, before, limit)
	if err != nil {
		return err
	}
	attempts, err := a.Store.DeliveryAttempts(ctx, each(ds, func(d models.Delivery) int64 { return d.ID }), listedAttempts)
	if err != nil {
		return err
	}
	out, next := pageOf(ds, limit,
		func(d models.Delivery) deliveryJSON { return deliveryOf(d, attempts[d.ID]) },
		func(d models.Delivery) any { return idCursor{d.ID} })
	return c.JSON(http.StatusOK, deliveryListJSON{out, next})
}

// deliveryAnswer answers one delivery with its payload and every attempt.
func (a *API) deliveryAnswer(c echo.Context, d models.Delivery) error {
	attempts, err := a.Store.DeliveryAttempts(c.Request().Context(), []int64{d.ID}, 0)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, deliveryAnswerJSON{deliveryOf(d, attempts[d.ID])})
}

// getDelivery shows one delivery with its payload and every attempt.
func (a *API) getDelivery(c echo.Context) error {
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	d, err := a.Store.DeliveryByID(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return a.deliveryAnswer(c, d)
}

// redeliver makes any delivery pending and due now, its retry schedule started over.
func (a *API) redeliver(c echo.Context) error {
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	d, err := a.Store.Redeliver(c.Request().Context(), id)
	switch {
	case errors.Is(err, models.ErrWebhookDisabled):
		return &Error{Status: http.StatusConflict, Code: "webhook_disabled", Message: "the webhook is disabled: enable it first"}
	case errors.Is(err, models.ErrDeliveryInFlight):
		return &Error{Status: http.StatusConflict, Code: "in_flight", Message: "the delivery is being attempted now"}
	case err != nil:
		return err
	}
	if a.Webhooks != nil {
		a.Webhooks.Wake()
	}
	return a.deliveryAnswer(c, d)
}

// webhookSecretJSON is a rotated subscription with its new secret, shown only in this answer.
type webhookSecretJSON struct {
	Secret              string      `json:"secret" pattern:"^whsec_" description:"the new signing secret, shown only now"`
	PreviousSecretUntil timestamp   `json:"previousSecretUntil" description:"until when deliveries also carry the previous secret's signature (OWED_WEBHOOK_SECRET_OVERLAP)"`
	Webhook             webhookJSON `json:"webhook"`
}

// rotateWebhookSecret gives a subscription a new signing secret in place and shows it once.
// For the overlap (OWED_WEBHOOK_SECRET_OVERLAP) every delivery carries two signatures in
// webhook-signature, one per secret, so the receiver can switch to the new secret whenever it
// likes within that time; its pending deliveries stay as they are.
func (a *API) rotateWebhookSecret(c echo.Context) error {
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	until := a.Clock.Now().Add(a.WebhookSecretOverlap).Truncate(time.Millisecond)
	secret := webhooks.NewSecret()
	ctx := c.Request().Context()
	var w models.Webhook
	err = a.Store.WithTx(ctx, func(tx *models.Store) error {
		was, err := tx.WebhookByID(ctx, id)
		if err != nil {
			return err
		}
		if w, err = tx.RotateWebhookSecret(ctx, id, secret, until); err != nil {
			return err
		}
		// The secrets themselves never enter the trail: when the one before stops signing.
		return audit(c, tx, models.AuditWebhookSecret, target("webhook", id),
			map[string]any{"previousSecretUntil": timePtr(was.PreviousSecretUntil)}, map[string]any{"previousSecretUntil": timeStr(until)})
	})
	if err != nil {
		return err
	}
	a.Log.Info("webhook secret rotated", "webhookId", w.ID, "previousSecretUntil", until, "by", caller(c).ID)
	c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
	return c.JSON(http.StatusOK, webhookSecretJSON{Secret: secret, PreviousSecretUntil: timeStr(until), Webhook: webhookOf(w)})
}
