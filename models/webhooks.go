package models

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/owed/owed/webhooks"
)

// Webhook events. EventAll subscribes to every event, including ones added later.
const (
	EventItemScreened     = "item.screened"
	EventSongScored       = "song.scored"
	EventBackfillFinished = "backfill.finished"
	EventModelBreaker     = "model.breaker"
	// EventItemAppealDecided: a moderator decided an author's appeal (see DecideAppeal).
	EventItemAppealDecided = "item.appeal.decided"
	// EventModelDrift: a drift run found the live model off its anchor set, once per episode.
	EventModelDrift = "model.drift"
	EventAll        = "*"
)

// WebhookEvents lists the events a subscription may name, in display order.
var WebhookEvents = []string{EventItemScreened, EventSongScored, EventBackfillFinished, EventModelBreaker, EventItemAppealDecided, EventModelDrift, EventAll}

// Why an inactive subscription stopped.
const (
	DisabledByAdmin = "admin" // PATCH active=false
	DisabledGone    = "gone"  // its receiver answered 410 Gone
)

// Errors of the webhook store.
var (
	// ErrWebhookDisabled refuses to make a delivery of an inactive subscription due.
	ErrWebhookDisabled = errors.New("the webhook is disabled")
	// ErrDeliveryInFlight refuses to change a delivery a worker holds the lease of.
	ErrDeliveryInFlight = errors.New("the delivery is being attempted now")
)

// Webhook is a subscription of a URL to events; Secret, the whsec_ signing key, is shown once.
type Webhook struct {
	ID             int64     `gorm:"column:id"`
	URL            string    `gorm:"column:url"`
	Events         []string  `gorm:"column:events;serializer:json"`
	Secret         string    `gorm:"column:secret"`
	Active         bool      `gorm:"column:active"`
	DisabledReason *string   `gorm:"column:disabled_reason"`
	CreatedAt      time.Time `gorm:"column:created_at;serializer:unixms"`
	// PreviousSecret is the secret the last rotation replaced, signed with until PreviousSecretUntil.
	PreviousSecret      *string    `gorm:"column:previous_secret"`
	PreviousSecretUntil *time.Time `gorm:"column:previous_secret_until;serializer:unixms"`
}

const webhookColumns = `id, url, events, secret, active, disabled_reason, created_at, previous_secret, previous_secret_until`

// SigningSecrets are the current secret and, while its overlap lasts at now, the previous one.
func (w Webhook) SigningSecrets(now time.Time) []string {
	out := []string{w.Secret}
	if w.PreviousSecret != nil && w.PreviousSecretUntil != nil && now.Before(*w.PreviousSecretUntil) {
		out = append(out, *w.PreviousSecret)
	}
	return out
}

// Delivery is one event owed to one subscription, leased like a content job while a worker
// attempts it. MsgID (the webhook-id header) and Payload stay the same on every attempt;
// Failures counts failed attempts since it was last made due, Attempts every attempt.
type Delivery struct {
	ID          int64          `gorm:"column:id"`
	WebhookID   int64          `gorm:"column:webhook_id"`
	MsgID       string         `gorm:"column:msg_id"`
	Event       string         `gorm:"column:event"`
	Payload     string         `gorm:"column:payload"`
	Status      DeliveryStatus `gorm:"column:status"`
	DueAt       time.Time      `gorm:"column:due_at;serializer:unixms"`
	Attempts    int            `gorm:"column:attempts"`
	Failures    int            `gorm:"column:failures"`
	LastStatus  *int           `gorm:"column:last_status"`
	LastError   *string        `gorm:"column:last_error"`
	LeaseUntil  *time.Time     `gorm:"column:lease_until;serializer:unixms"`
	LeaseOwner  *string        `gorm:"column:lease_owner"`
	DeliveredAt *time.Time     `gorm:"column:delivered_at;serializer:unixms"`
	CreatedAt   time.Time      `gorm:"column:created_at;serializer:unixms"`
}

const deliveryColumns = `id, webhook_id, msg_id, event, payload, status, due_at, attempts, failures, last_status,
	last_error, lease_until, lease_owner, delivered_at, created_at`

// deliveryHeadColumns are deliveryColumns with the payload left out (a list's rows).
const deliveryHeadColumns = `id, webhook_id, msg_id, event, '' AS payload, status, due_at, attempts, failures, last_status,
	last_error, lease_until, lease_owner, delivered_at, created_at`

// DeliveryAttempt is one attempt at a delivery: HTTP status and error (nil when none), latency.
type DeliveryAttempt struct {
	ID         int64     `gorm:"column:id"`
	DeliveryID int64     `gorm:"column:delivery_id"`
	Attempt    int       `gorm:"column:attempt"`
	At         time.Time `gorm:"column:at;serializer:unixms"`
	Status     *int      `gorm:"column:status"`
	LatencyMs  int64     `gorm:"column:latency_ms"`
	Error      *string   `gorm:"column:error"`
}

// ItemScreenedData is the data of an item.screened event (SongID for revisions and comments).
type ItemScreenedData struct {
	Kind       Kind    `json:"kind"`
	ID         int64   `json:"id"`
	UserID     int64   `json:"userId"`
	SongID     *int64  `json:"songId,omitempty"`
	Verdict    Verdict `json:"verdict"`
	Confidence float64 `json:"confidence"`
	// DecidedBy is the moderator's user id when the verdict was decided by hand.
	DecidedBy *int64 `json:"decidedBy,omitempty"`
	// Note is that moderator's note on this verdict (an overturn's own, never an earlier one's).
	Note *string `json:"note,omitempty"`
	// Reason is that verdict's public reason, for the item's author.
	Reason *string `json:"reason,omitempty"`
}

// SongScoredData is the data of a song.scored event.
type SongScoredData struct {
	RevisionID int64              `json:"revisionId"`
	SongID     int64              `json:"songId"`
	UserID     int64              `json:"userId"`
	Art        float64            `json:"art"`
	ArtRuns    []float64          `json:"artRuns"`
	Criteria   map[string]float64 `json:"criteria"`
	Model      string             `json:"model"`
	Rubric     string             `json:"rubric"`
}

// BackfillFinishedData is the data of a backfill.finished event (times in UTC).
type BackfillFinishedData struct {
	ChatID     string     `json:"chatId"`
	GuildID    *string    `json:"guildId"`
	Processed  int64      `json:"processed"`
	Cached     int64      `json:"cached"`
	Failed     int64      `json:"failed"`
	Total      int64      `json:"total"`
	StartedAt  *time.Time `json:"startedAt"`
	FinishedAt time.Time  `json:"finishedAt"`
}

// eventPattern is the LIKE pattern of event in a subscription's JSON array of events.
func eventPattern(event string) string { return `%"` + event + `"%` }

// ValidWebhookEvent reports whether event may be published (every event but "*").
func ValidWebhookEvent(event string) bool {
	return event != EventAll && slices.Contains(WebhookEvents, event)
}

// EnqueueWebhook owes event, with payload {type, timestamp, data}, to each active subscriber.
func (s *Store) EnqueueWebhook(ctx context.Context, event string, data any) error {
	return wrap(s.enqueueWebhook(ctx, event, func() (any, error) { return data, nil }), "enqueue webhook %s", event)
}

// subscribersSQL selects the active webhooks that want an event (arguments: eventPattern of it, of EventAll).
const subscribersSQL = `SELECT id FROM webhooks WHERE active = 1 AND (events LIKE ? OR events LIKE ?)`

// webhookSubscribed reports whether an active webhook wants event.
func (s *Store) webhookSubscribed(ctx context.Context, event string) (bool, error) {
	subscribers, err := fetch[[]int64](ctx, s, s.db, subscribersSQL+` LIMIT 1`,
		eventPattern(event), eventPattern(EventAll))
	return wrapped(len(subscribers) > 0, err, "webhook subscribers of %s", event)
}

// enqueueWebhook is EnqueueWebhook with the data built only when someone subscribes.
func (s *Store) enqueueWebhook(ctx context.Context, event string, data func() (any, error)) error {
	if !ValidWebhookEvent(event) {
		return fmt.Errorf("webhook: unknown event %q", event)
	}
	if subscribed, err := s.webhookSubscribed(ctx, event); err != nil || !subscribed {
		return err
	}
	d, err := data()
	if err != nil {
		return err
	}
	return s.insertDeliveries(ctx, event, d)
}

// insertDeliveries owes event, with data d, to every active subscription to it.
func (s *Store) insertDeliveries(ctx context.Context, event string, d any) error {
	now := s.clock.Now()
	body, err := webhooks.Payload(event, now.UTC().Format(TimeFormat), d)
	if err != nil {
		return fmt.Errorf("webhook %s payload: %w", event, err)
	}
	ms := now.UnixMilli()
	_, err = s.exec(ctx, `INSERT INTO webhook_deliveries (webhook_id, msg_id, event, payload, status, due_at, created_at)
		SELECT id, ?, ?, ?, 'pending', ?, ? FROM webhooks WHERE active = 1 AND (events LIKE ? OR events LIKE ?)`,
		webhooks.NewMessageID(), event, string(body), ms, ms, eventPattern(event), eventPattern(EventAll))
	return wrap(err, "insert %s deliveries", event)
}

// screenedData is item.screened's data for a verdict just recorded in this transaction.
func (s *Store) screenedData(ctx context.Context, kind Kind, itemID int64, verdict Verdict, confidence float64) (ItemScreenedData, error) {
	d := ItemScreenedData{Kind: kind, ID: itemID, Verdict: verdict, Confidence: confidence}
	q := `SELECT user_id, song_id FROM revisions WHERE id = ?`
	switch kind {
	case KindComment:
		q = `SELECT user_id, song_id FROM comments WHERE id = ?`
	case KindPitch:
		q = `SELECT user_id, NULL AS song_id FROM pitches WHERE id = ?`
	}
	r, err := fetch[struct {
		UserID int64  `gorm:"column:user_id"`
		SongID *int64 `gorm:"column:song_id"`
	}](ctx, s, s.db, q, itemID)
	d.UserID, d.SongID = r.UserID, r.SongID
	return d, wrap(err, "item.screened data of %s %d", kind, itemID)
}

// enqueueScored owes song.scored for a score just recorded in this transaction.
func (s *Store) enqueueScored(ctx context.Context, sc Score) error {
	return s.enqueueWebhook(ctx, EventSongScored, func() (any, error) {
		d := SongScoredData{RevisionID: sc.RevisionID, Art: sc.Art, ArtRuns: sc.ArtRuns, Criteria: sc.Criteria,
			Model: sc.Model, Rubric: sc.Rubric}
		r, err := fetch[struct {
			UserID int64 `gorm:"column:user_id"`
			SongID int64 `gorm:"column:song_id"`
		}](ctx, s, s.db, `SELECT user_id, song_id FROM revisions WHERE id = ?`, sc.RevisionID)
		if err != nil {
			return nil, err
		}
		d.UserID, d.SongID = r.UserID, r.SongID
		if d.ArtRuns == nil {
			d.ArtRuns = []float64{}
		}
		if d.Criteria == nil {
			d.Criteria = map[string]float64{}
		}
		return d, nil
	})
}

// CreateWebhook subscribes url to events (checked by the caller) with the signing secret.
func (s *Store) CreateWebhook(ctx context.Context, url string, events []string, secret string) (Webhook, error) {
	ev, err := json.Marshal(events)
	if err != nil {
		return Webhook{}, fmt.Errorf("create webhook: %w", err)
	}
	w := Webhook{URL: url, Events: events, Secret: secret, Active: true, CreatedAt: fromMillis(s.nowMs())}
	if err := s.scan(ctx, s.db, &w.ID, `INSERT INTO webhooks (url, events, secret, active, created_at) VALUES (?, ?, ?, 1, ?) RETURNING id`,
		url, string(ev), secret, w.CreatedAt.UnixMilli()); err != nil {
		return Webhook{}, fmt.Errorf("create webhook: %w", err)
	}
	return w, nil
}

// RotateWebhookSecret makes secret the signing one, the old one still used until until (ErrNotFound).
func (s *Store) RotateWebhookSecret(ctx context.Context, id int64, secret string, until time.Time) (Webhook, error) {
	return first[Webhook](ctx, s, s.db, "webhook", id, `UPDATE webhooks SET previous_secret = secret, previous_secret_until = ?, secret = ?
		WHERE id = ? RETURNING `+webhookColumns, until.UnixMilli(), secret, id)
}

// ListWebhooks pages through subscriptions by id, after the id afterID.
func (s *Store) ListWebhooks(ctx context.Context, afterID int64, limit int) ([]Webhook, error) {
	rows, err := fetch[[]Webhook](ctx, s, s.read, `SELECT `+webhookColumns+` FROM webhooks WHERE id > ? ORDER BY id LIMIT ?`,
		afterID, limit)
	return rows, wrap(err, "list webhooks")
}

// WebhookByID finds a subscription; ErrNotFound when there is none.
func (s *Store) WebhookByID(ctx context.Context, id int64) (Webhook, error) {
	return first[Webhook](ctx, s, s.db, "webhook", id, `SELECT `+webhookColumns+` FROM webhooks WHERE id = ?`, id)
}

// WebhooksByID reads the existing subscriptions of ids from the writer, so a disable is seen at once.
func (s *Store) WebhooksByID(ctx context.Context, ids []int64) (map[int64]Webhook, error) {
	out := map[int64]Webhook{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := fetch[[]Webhook](ctx, s, s.db, `SELECT `+webhookColumns+` FROM webhooks WHERE `+s.dialect.idIn("id"), idList(ids))
	if err != nil {
		return nil, fmt.Errorf("webhooks by id: %w", err)
	}
	for _, r := range rows {
		out[r.ID] = r
	}
	return out, nil
}

// SetWebhookActive enables or disables a subscription; disabling cancels its pending deliveries.
func (s *Store) SetWebhookActive(ctx context.Context, id int64, active bool, reason string) (Webhook, error) {
	var w Webhook
	err := s.WithTx(ctx, func(tx *Store) error {
		why := &reason // why an inactive subscription stopped; NULL while active
		if active {
			why = nil
		}
		n, err := tx.exec(ctx, `UPDATE webhooks SET active = ?, disabled_reason = ? WHERE id = ?`, boolInt(active), why, id)
		if err != nil {
			return err
		}
		if n == 0 {
			return missing("webhook", id)
		}
		if !active {
			if err := tx.cancelDeliveries(ctx, id); err != nil {
				return err
			}
		}
		w, err = tx.WebhookByID(ctx, id)
		return err
	})
	return wrapped(w, err, "set webhook %d active=%t", id, active)
}

// cancelDeliveries cancels a subscription's pending deliveries; a leased one still records its attempt.
func (s *Store) cancelDeliveries(ctx context.Context, webhookID int64) error {
	_, err := s.exec(ctx, `UPDATE webhook_deliveries SET status = 'cancelled' WHERE webhook_id = ? AND status = 'pending'`,
		webhookID)
	return wrap(err, "cancel the deliveries of webhook %d", webhookID)
}

// DeleteWebhook deletes a subscription with all its deliveries and their attempts.
func (s *Store) DeleteWebhook(ctx context.Context, id int64) error {
	n, err := s.exec(ctx, `DELETE FROM webhooks WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("delete webhook %d: %w", id, err)
	}
	if n == 0 {
		return missing("webhook", id)
	}
	return nil
}

// NextDeliveryDue is the earliest due time of a pending, unheld delivery (nil: none), from the reader.
func (s *Store) NextDeliveryDue(ctx context.Context) (*time.Time, error) {
	due, err := fetch[*int64](ctx, s, s.read, `SELECT MIN(d.due_at) FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id
		WHERE d.status = 'pending' AND w.active = 1 AND NOT `+deliveriesHeld) // nil: none pending
	if err != nil {
		return nil, fmt.Errorf("next delivery due: %w", err)
	}
	if due == nil {
		return nil, nil
	}
	t := fromMillis(*due)
	return &t, nil
}

// ClaimDeliveries leases up to limit due deliveries to owner for lease (none while held).
func (s *Store) ClaimDeliveries(ctx context.Context, limit int, lease time.Duration, owner string) ([]Delivery, error) {
	now := s.nowMs()
	until := now + lease.Milliseconds()
	q, args := s.dialect.claimDeliveries(now, until, limit, owner)
	ds, err := fetch[[]Delivery](ctx, s, s.db, q, args...)
	return ds, wrap(err, "claim webhook deliveries")
}

// Attempt outcomes a worker reports to FinishDelivery.
const (
	AttemptDelivered = "delivered" // a 2xx: the delivery ends
	AttemptRetry     = "retry"     // anything else: due again at NextAt
	AttemptGone      = "gone"      // a 410: the subscription is disabled, its deliveries cancelled
)

// AttemptResult is how one attempt at a claimed delivery went.
type AttemptResult struct {
	Outcome   string    // AttemptDelivered, AttemptRetry or AttemptGone
	At        time.Time // when the attempt started
	Status    *int      // the receiver's HTTP status; nil when none came back
	LatencyMs int64
	Error     *string
	NextAt    time.Time // AttemptRetry: when the delivery is due again
}

// FinishDelivery records an attempt at a claimed delivery and its consequence in one
// transaction: delivered ends it, retry makes it due at r.NextAt with one more failure, gone
// cancels it with its subscription's pending deliveries and disables the subscription; the
// lease is freed. ok is false when the claim no longer held: then only the attempt is kept.
func (s *Store) FinishDelivery(ctx context.Context, d Delivery, r AttemptResult) (bool, error) {
	var ok bool
	err := s.WithTx(ctx, func(tx *Store) error {
		if r.Outcome == AttemptGone {
			// Locked first, so two 410s at once queue here instead of deadlocking.
			if _, err := tx.exec(ctx, `UPDATE webhooks SET active = 0, disabled_reason = 'gone' WHERE id = ?`, d.WebhookID); err != nil {
				return err
			}
		}
		if _, err := tx.exec(ctx, `INSERT INTO webhook_attempts (delivery_id, attempt, at, status, latency_ms, error)
			SELECT id, attempts + 1, ?, ?, ?, ? FROM webhook_deliveries WHERE id = ?`,
			r.At.UnixMilli(), r.Status, r.LatencyMs, r.Error, d.ID); err != nil {
			return err
		}
		var set string
		var args []any
		switch r.Outcome {
		case AttemptDelivered:
			set, args = `status = 'delivered', delivered_at = ?, failures = 0, last_error = NULL`, []any{tx.nowMs()}
		case AttemptRetry:
			set, args = `due_at = ?, failures = failures + 1, last_error = ?`, []any{r.NextAt.UnixMilli(), r.Error}
		case AttemptGone:
			set, args = `status = 'cancelled', failures = failures + 1, last_error = ?`, []any{r.Error}
		default:
			return fmt.Errorf("webhook: unknown attempt outcome %q", r.Outcome)
		}
		n, err := tx.exec(ctx, `UPDATE webhook_deliveries SET `+set+`, attempts = attempts + 1, last_status = ?,
			lease_until = NULL, lease_owner = NULL WHERE id = ? AND lease_owner = ? AND lease_until = ?`,
			append(args, r.Status, d.ID, d.LeaseOwner, d.LeaseUntil)...)
		if err != nil {
			return err
		}
		ok = n == 1
		if r.Outcome == AttemptGone {
			return tx.cancelDeliveries(ctx, d.WebhookID)
		}
		return nil
	})
	return wrapped(ok, err, "finish delivery %d", d.ID)
}

// ListDeliveries pages through a subscription's deliveries newest first, before beforeID, without payloads.
func (s *Store) ListDeliveries(ctx context.Context, webhookID int64, status DeliveryStatus, beforeID int64, limit int) ([]Delivery, error) {
	q := `SELECT ` + deliveryHeadColumns + ` FROM webhook_deliveries WHERE webhook_id = ?`
	args := []any{webhookID}
	if status != "" {
		q += ` AND status = ?`
		args = append(args, status)
	}
	if beforeID > 0 {
		q += ` AND id < ?`
		args = append(args, beforeID)
	}
	q += ` ORDER BY id DESC LIMIT ?`
	args = append(args, limit)
	ds, err := fetch[[]Delivery](ctx, s, s.read, q, args...)
	return ds, wrap(err, "list the deliveries of webhook %d", webhookID)
}

// DeliveryByID finds one delivery, payload included; ErrNotFound when there is none.
func (s *Store) DeliveryByID(ctx context.Context, id int64) (Delivery, error) {
	return first[Delivery](ctx, s, s.db, "delivery", id, `SELECT `+deliveryColumns+` FROM webhook_deliveries WHERE id = ?`, id)
}

// DeliveryAttempts lists each delivery's attempts, oldest first (last > 0: only the last ones).
func (s *Store) DeliveryAttempts(ctx context.Context, deliveryIDs []int64, last int) (map[int64][]DeliveryAttempt, error) {
	out := map[int64][]DeliveryAttempt{}
	if len(deliveryIDs) == 0 {
		return out, nil
	}
	q := `SELECT id, delivery_id, attempt, at, status, latency_ms, error FROM webhook_attempts WHERE ` + s.dialect.idIn("delivery_id")
	args := []any{idList(deliveryIDs)}
	if last > 0 {
		q = `SELECT id, delivery_id, attempt, at, status, latency_ms, error FROM (
			SELECT a.*, ROW_NUMBER() OVER (PARTITION BY delivery_id ORDER BY id DESC) AS n
			FROM webhook_attempts a WHERE ` + s.dialect.idIn("delivery_id") + `) ranked WHERE n <= ?`
		args = append(args, last)
	}
	rows, err := fetch[[]DeliveryAttempt](ctx, s, s.read, q+` ORDER BY delivery_id, id`, args...)
	if err != nil {
		return nil, fmt.Errorf("delivery attempts: %w", err)
	}
	for _, a := range rows {
		out[a.DeliveryID] = append(out[a.DeliveryID], a)
	}
	return out, nil
}

// Redeliver makes a delivery pending and due now, its retry schedule started over, even when
// delivered or cancelled. ErrWebhookDisabled while its subscription is inactive,
// ErrDeliveryInFlight while a worker holds it.
func (s *Store) Redeliver(ctx context.Context, id int64) (Delivery, error) {
	var d Delivery
	err := s.WithTx(ctx, func(tx *Store) error {
		var err error
		if d, err = tx.DeliveryByID(ctx, id); err != nil {
			return err
		}
		w, err := tx.WebhookByID(ctx, d.WebhookID)
		if err != nil {
			return err
		}
		if !w.Active {
			return ErrWebhookDisabled
		}
		now := tx.nowMs()
		n, err := tx.exec(ctx, `UPDATE webhook_deliveries SET status = 'pending', due_at = ?, failures = 0, delivered_at = NULL
			WHERE id = ? AND (lease_until IS NULL OR lease_until <= ?)`, now, id, now)
		if err != nil {
			return err
		}
		if n == 0 {
			return ErrDeliveryInFlight
		}
		d, err = tx.DeliveryByID(ctx, id)
		return err
	})
	return wrapped(d, err, "redeliver %d", id)
}

// WebhookHealth is whether a subscription's newest attempted delivery is failing, and with what.
type WebhookHealth struct {
	Failing    bool
	LastStatus *int
	LastError  *string
}

// WebhookHealths reads the health of each webhook of ids from its newest attempted delivery.
func (s *Store) WebhookHealths(ctx context.Context, ids []int64) (map[int64]WebhookHealth, error) {
	out := make(map[int64]WebhookHealth, len(ids))
	for _, id := range ids {
		r, ok, err := maybe[struct {
			Status     DeliveryStatus `gorm:"column:status"`
			LastStatus *int           `gorm:"column:last_status"`
			LastError  *string        `gorm:"column:last_error"`
		}](ctx, s, s.read, `SELECT status, last_status, last_error FROM webhook_deliveries
			WHERE webhook_id = ? AND attempts > 0 ORDER BY id DESC LIMIT 1`, id)
		if err != nil {
			return nil, fmt.Errorf("health of webhook %d: %w", id, err)
		}
		if ok {
			out[id] = WebhookHealth{Failing: r.Status != DeliveryDelivered, LastStatus: r.LastStatus, LastError: r.LastError}
		}
	}
	return out, nil
}
