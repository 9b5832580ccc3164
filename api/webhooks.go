package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/owed/owed/models"
	"github.com/owed/owed/webhooks"
)

type webhookJSON struct {
	ID     int64    `json:"id"`
	URL    string   `json:"url"`
	Events []string `json:"events"`
	Active bool     `json:"active"`
	// DisabledReason is null while active; "admin" or "gone" (the receiver answered 410).
	DisabledReason *string `json:"disabledReason"`
	CreatedAt      string  `json:"createdAt"`
	// Failing is true while the newest attempted delivery is not delivered: its receiver
	// refuses, fails or cannot be reached; LastStatus and LastError say how.
	Failing    bool    `json:"failing"`
	LastStatus *int    `json:"lastStatus"`
	LastError  *string `json:"lastError"`
}

func webhookOf(w models.Webhook) webhookJSON {
	events := w.Events
	if events == nil {
		events = []string{}
	}
	return webhookJSON{ID: w.ID, URL: w.URL, Events: events, Active: w.Active, DisabledReason: w.DisabledReason, CreatedAt: wireTime(w.CreatedAt)}
}

type attemptJSON struct {
	Attempt   int     `json:"attempt"`
	At        string  `json:"at"`
	Status    *int    `json:"status"`
	LatencyMs int64   `json:"latencyMs"`
	Error     *string `json:"error"`
}

type deliveryJSON struct {
	ID            int64                 `json:"id"`
	WebhookID     int64                 `json:"webhookId"`
	MessageID     string                `json:"messageId"`
	Event         string                `json:"event"`
	Status        models.DeliveryStatus `json:"status"`
	Attempts      int                   `json:"attempts"`
	LastStatus    *int                  `json:"lastStatus"`
	LastError     *string               `json:"lastError"`
	NextAttemptAt *string               `json:"nextAttemptAt"`
	DeliveredAt   *string               `json:"deliveredAt"`
	CreatedAt     string                `json:"createdAt"`
	AttemptLog    []attemptJSON         `json:"attemptLog"`
	Payload       json.RawMessage       `json:"payload,omitempty"`
}

func deliveryOf(d models.Delivery, attempts []models.DeliveryAttempt) deliveryJSON {
	out := deliveryJSON{ID: d.ID, WebhookID: d.WebhookID, MessageID: d.MsgID, Event: d.Event, Status: d.Status,
		Attempts: d.Attempts, LastStatus: d.LastStatus, LastError: d.LastError, DeliveredAt: msTimePtr(d.DeliveredAt),
		CreatedAt: msTime(d.CreatedAt), AttemptLog: make([]attemptJSON, 0, len(attempts))}
	if d.Status == models.DeliveryPending {
		next := msTime(d.DueAt)
		out.NextAttemptAt = &next
	}
	for _, a := range attempts {
		out.AttemptLog = append(out.AttemptLog, attemptJSON{Attempt: a.Attempt, At: msTime(a.At), Status: a.Status,
			LatencyMs: a.LatencyMs, Error: a.Error})
	}
	if d.Payload != "" {
		out.Payload = json.RawMessage(d.Payload)
	}
	return out
}

// listedAttempts is how many of each delivery's latest attempts a list shows; the delivery's
// own route shows them all.
const listedAttempts = 20

type webhookRequest struct {
	URL    string   `json:"url"`
	Events []string `json:"events"`
}

// checkEvents validates a subscription's events: at least one, each known; duplicates go.
func checkEvents(events []string) ([]string, error) {
	if len(events) == 0 {
		return nil, invalid("events", "events must name at least one of item.screened, song.scored, backfill.finished, model.breaker or *")
	}
	var out []string
	for _, e := range events {
		if !slices.Contains(models.WebhookEvents, e) {
			return nil, invalid("events", "events may hold only item.screened, song.scored, backfill.finished, model.breaker and *; not "+strconv.Quote(e))
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
	secret := models.NewWebhookSecret()
	w, err := a.Store.CreateWebhook(ctx, url, events, secret)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, map[string]any{"webhook": webhookOf(w), "secret": secret})
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
	ids := make([]int64, len(ws))
	for i, w := range ws {
		ids[i] = w.ID
	}
	health, err := a.Store.WebhookHealths(ctx, ids)
	if err != nil {
		return err
	}
	withHealth := func(w models.Webhook) webhookJSON {
		out := webhookOf(w)
		h := health[w.ID]
		out.Failing, out.LastStatus, out.LastError = h.Failing, h.LastStatus, h.LastError
		return out
	}
	return page(c, "webhooks", ws, limit, withHealth, func(w models.Webhook) any { return idCursor{w.ID} })
}

type webhookUpdate struct {
	Active *bool `json:"active"`
}

// updateWebhook enables or disables a subscription. Disabling cancels its pending
// deliveries; enabling (a 410-disabled one too) makes the events from then on owed to it.
func (a *API) updateWebhook(c echo.Context) error {
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	var req webhookUpdate
	if err := bind(c, &req); err != nil {
		return err
	}
	if req.Active == nil {
		return invalid("active", "active is required: true or false")
	}
	w, err := a.Store.SetWebhookActive(c.Request().Context(), id, *req.Active, models.DisabledByAdmin)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"webhook": webhookOf(w)})
}

// deleteWebhook deletes a subscription with its deliveries and their attempts.
func (a *API) deleteWebhook(c echo.Context) error {
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	if err := a.Store.DeleteWebhook(c.Request().Context(), id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// listDeliveries pages through a subscription's deliveries, newest first, each with its
// latest attempts.
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
	ids := make([]int64, 0, len(ds))
	for _, d := range ds {
		ids = append(ids, d.ID)
	}
	attempts, err := a.Store.DeliveryAttempts(ctx, ids, listedAttempts)
	if err != nil {
		return err
	}
	return page(c, "deliveries", ds, limit,
		func(d models.Delivery) deliveryJSON { return deliveryOf(d, attempts[d.ID]) },
		func(d models.Delivery) any { return idCursor{d.ID} })
}

// deliveryAnswer answers one delivery with its payload and every attempt.
func (a *API) deliveryAnswer(c echo.Context, d models.Delivery) error {
	attempts, err := a.Store.DeliveryAttempts(c.Request().Context(), []int64{d.ID}, 0)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"delivery": deliveryOf(d, attempts[d.ID])})
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

// redeliver makes a delivery due now and pending again (a delivered or cancelled one too):
// a new attempt with the same webhook-id and body, its retry schedule started over.
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
