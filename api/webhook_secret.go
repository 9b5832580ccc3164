package api

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/owed/owed/models"
	"github.com/owed/owed/webhooks"
)

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
