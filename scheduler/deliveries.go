package scheduler

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/owed/owed/clock"
	"github.com/owed/owed/metrics"
	"github.com/owed/owed/models"
	"github.com/owed/owed/outbound"
	"github.com/owed/owed/webhooks"
)

// DeliverySchedule is the Standard Webhooks retry schedule: the wait after the 1st, 2nd, …
// failed attempt in a row, the last step repeating (a delivery is never given up).
var DeliverySchedule = []time.Duration{5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour}

// DeliveryJitter is the spread applied to every scheduled wait: ±10%.
const DeliveryJitter = 0.10

// DeliveryRetryDelay is the wait, without jitter, after failures (>= 1) failed attempts in a row.
func DeliveryRetryDelay(failures int) time.Duration {
	i := min(max(failures, 1), len(DeliverySchedule)) - 1
	return DeliverySchedule[i]
}

// DeliveriesConfig tunes the webhook deliveries. Zero values take the defaults; NewDeliveries
// refuses values that cannot work.
type DeliveriesConfig struct {
	// AllowPrivate lets deliveries reach non-public addresses (OWED_WEBHOOKS_ALLOW_PRIVATE);
	// off, such a delivery fails like a network error, and is retried.
	AllowPrivate bool
	Timeout      time.Duration // bounds one attempt, dial to answer (DefaultDeliveryTimeout)
	// Lease is how long a claim holds a delivery (DefaultLease); it must exceed Timeout.
	Lease         time.Duration
	Concurrency   int           // deliveries attempted at once (default 16)
	Poll          time.Duration // the loop's period when not woken (default 1s)
	MaxRetryAfter time.Duration // caps a receiver's Retry-After (default 24h)
	Owner         string        // this process's lease owner, shared by its runners (default: a new one)
	UserAgent     string        // sent with every delivery (default "owed-webhooks")
}

// DefaultDeliveryTimeout bounds one delivery attempt by default.
const DefaultDeliveryTimeout = 15 * time.Second

func (c *DeliveriesConfig) applyDefaults() error {
	if c.Timeout < 0 || c.Lease < 0 || c.Concurrency < 0 || c.Poll < 0 || c.MaxRetryAfter < 0 {
		return errors.New("webhooks: durations and concurrency must not be negative")
	}
	c.Timeout = cmp.Or(c.Timeout, DefaultDeliveryTimeout)
	c.Lease = cmp.Or(c.Lease, DefaultLease)
	if c.Lease <= c.Timeout {
		return fmt.Errorf("webhooks: the lease (%s) must exceed the attempt timeout (%s)", c.Lease, c.Timeout)
	}
	c.Concurrency = cmp.Or(c.Concurrency, 16)
	c.Poll = cmp.Or(c.Poll, time.Second)
	c.MaxRetryAfter = cmp.Or(c.MaxRetryAfter, 24*time.Hour)
	c.Owner = ownerOr(c.Owner)
	c.UserAgent = cmp.Or(c.UserAgent, "owed-webhooks")
	return nil
}

// Deliveries attempts due webhook deliveries: claimed with a lease into free slots, signed,
// POSTed, and finished (delivered, retried or gone). Start runs its loop; RunDue one pass.
type Deliveries struct {
	store   *models.Store
	clock   clock.Clock
	log     *slog.Logger
	metrics *metrics.Metrics
	cfg     DeliveriesConfig
	client  *http.Client

	runner *runner
	due    *loop // the pass over due deliveries, every Poll and on Wake
}

// NewDeliveries makes the deliveries runner; it errors on a configuration that cannot work.
// clk and m may be nil.
func NewDeliveries(store *models.Store, clk clock.Clock, log *slog.Logger, m *metrics.Metrics, cfg DeliveriesConfig) (*Deliveries, error) {
	if err := cfg.applyDefaults(); err != nil {
		return nil, err
	}
	clk, log = orDefaults(clk, log)
	// A redirect is an answer like any other non-2xx: retried, never followed.
	client := outbound.NewClient(outbound.Options{AllowPrivate: cfg.AllowPrivate, Timeout: cfg.Timeout,
		DialTimeout: min(cfg.Timeout, 10*time.Second), MaxIdleConnsPerHost: cfg.Concurrency})
	d := &Deliveries{store: store, clock: clk, log: log, metrics: m, cfg: cfg, client: client}
	d.runner = newRunner("webhook deliveries", log, func(ctx context.Context) (int64, error) {
		return store.ReleaseLeases(ctx, models.LeasedDeliveries, cfg.Owner)
	})
	d.due = newLoop("webhook deliveries", func(ctx context.Context) error {
		_, err := d.RunDue(ctx)
		return err
	})
	return d, nil
}

// Config is the configuration with defaults applied.
func (d *Deliveries) Config() DeliveriesConfig { return d.cfg }

// Wake makes a running loop look for due deliveries now instead of at its next poll.
func (d *Deliveries) Wake() { d.due.Wake() }

// Start runs the delivery loop until ctx ends or Stop: a pass at once, then one when woken.
func (d *Deliveries) Start(ctx context.Context) error { return d.runner.start(ctx, d.due) }

// ScheduleOn adds "webhook deliveries" to s, every DeliveriesConfig.Poll.
func (d *Deliveries) ScheduleOn(s *Schedule) error {
	return s.Every("webhook deliveries", d.cfg.Poll, d.due.tick)
}

// Stop lets attempts in flight finish until ctx ends, cancels the rest (released uncounted),
// and frees this process's leases. It may be called more than once, and without Start.
func (d *Deliveries) Stop(ctx context.Context) error {
	err := d.runner.Stop(ctx)
	d.client.CloseIdleConnections()
	return err
}

// claimed is a claimed delivery and the subscription it goes to.
type claimed struct {
	delivery models.Delivery
	webhook  models.Webhook
}

// RunDue attempts every due delivery, at most Concurrency at once, until none is due (or ctx
// ends, or Stop), and returns how many it attempted; retries are due 4.5 s later at the
// soonest, so a pass ends. A cancelled attempt is abandoned uncounted.
func (d *Deliveries) RunDue(ctx context.Context) (int, error) {
	ctx, done, ok := d.runner.join(ctx)
	if !ok {
		return 0, nil
	}
	defer done()
	return pool[claimed]{slots: d.cfg.Concurrency, quit: d.runner.quit,
		// A read first: an idle loop should not take SQLite's write lock every poll.
		idle: func(ctx context.Context) (bool, error) {
			next, err := d.store.NextDeliveryDue(ctx)
			if err != nil {
				return false, fmt.Errorf("webhook deliveries due: %w", err)
			}
			return next != nil && !next.After(d.clock.Now()), nil
		},
		claim: d.claim,
		run:   func(ctx context.Context, c claimed) { d.attempt(ctx, c.delivery, c.webhook) },
	}.drain(ctx)
}

// claim leases up to free due deliveries and returns those whose subscription is active; the
// others are let go at once.
func (d *Deliveries) claim(ctx context.Context, free int) ([]claimed, int, error) {
	dels, err := d.store.ClaimDeliveries(ctx, free, d.cfg.Lease, d.cfg.Owner)
	if err != nil {
		return nil, 0, fmt.Errorf("claim webhook deliveries: %w", err)
	}
	if len(dels) == 0 {
		return nil, 0, nil
	}
	ids := make([]int64, 0, len(dels))
	for _, del := range dels {
		ids = append(ids, del.WebhookID)
	}
	hooks, err := d.store.WebhooksByID(ctx, ids)
	if err != nil {
		for _, del := range dels {
			d.release(ctx, del)
		}
		return nil, 0, fmt.Errorf("webhooks of claimed deliveries: %w", err)
	}
	run := make([]claimed, 0, len(dels))
	for _, del := range dels {
		w, ok := hooks[del.WebhookID]
		if !ok || !w.Active {
			d.release(ctx, del)
			continue
		}
		run = append(run, claimed{del, w})
	}
	return run, len(dels), nil
}

// release lets a claimed delivery go without an attempt, even when ctx has ended (stopping).
func (d *Deliveries) release(ctx context.Context, del models.Delivery) {
	if err := d.store.ReleaseLease(context.WithoutCancel(ctx), models.LeasedDeliveries, del.ID, del.LeaseOwner, del.LeaseUntil); err != nil {
		d.log.Error("release webhook delivery", "deliveryId", del.ID, "err", err)
	}
}

// maxDeliveryErrorLen bounds the error text kept with an attempt.
const maxDeliveryErrorLen = 500

// attempt sends one claimed delivery and records how it went.
func (d *Deliveries) attempt(ctx context.Context, del models.Delivery, w models.Webhook) {
	start := d.clock.Now()
	res := models.AttemptResult{At: start}
	var retryAfter time.Duration
	var msg string
	began := time.Now()
	status, header, err := d.post(ctx, w, del, start.Unix(), []byte(del.Payload))
	res.LatencyMs = time.Since(began).Milliseconds()
	if err == nil {
		res.Status = &status
	}
	switch {
	case err != nil && ctx.Err() != nil:
		// Stopping, not failing: the delivery goes back as it was, for whoever runs next.
		d.release(ctx, del)
		return
	case err != nil:
		res.Outcome, msg = models.AttemptRetry, deliveryError(err, d.cfg.Timeout)
	case status >= 200 && status < 300:
		res.Outcome = models.AttemptDelivered
	case status == http.StatusGone:
		res.Outcome, msg = models.AttemptGone, "410 Gone: the receiver asked to stop; the webhook is disabled"
	default:
		res.Outcome, msg = models.AttemptRetry, strconv.Itoa(status)+" "+http.StatusText(status)
		if ra, ok := outbound.RetryAfter(header, d.clock.Now()); ok {
			retryAfter = min(ra, d.cfg.MaxRetryAfter)
			msg += fmt.Sprintf(" (Retry-After %s)", retryAfter)
		}
	}
	if msg != "" {
		res.Error = &msg
	}
	if res.Outcome == models.AttemptRetry {
		res.NextAt = d.clock.Now().Add(max(jitter(DeliveryRetryDelay(del.Failures+1)), retryAfter))
	}
	ok, err := d.store.FinishDelivery(context.WithoutCancel(ctx), del, res)
	if err != nil {
		// Unrecorded: the lease runs out and the delivery is attempted again.
		d.log.Error("record webhook attempt", "deliveryId", del.ID, "err", err)
		return
	}
	if d.metrics != nil {
		d.metrics.Deliveries.WithLabelValues(res.Outcome).Inc()
	}
	attrs := []slog.Attr{slog.Int64("webhookId", w.ID), slog.Int64("deliveryId", del.ID), slog.String("msgId", del.MsgID),
		slog.String("event", del.Event), slog.String("outcome", res.Outcome), slog.Int("attempt", del.Attempts+1),
		slog.Int64("latencyMs", res.LatencyMs), slog.Bool("held", ok)}
	attrs = withOpt(withOpt(attrs, "status", res.Status), "error", res.Error)
	if res.Outcome == models.AttemptRetry {
		attrs = append(attrs, slog.Time("nextAttemptAt", res.NextAt))
	}
	level := slog.LevelInfo
	if res.Outcome == models.AttemptGone {
		level = slog.LevelWarn
	}
	d.log.LogAttrs(context.Background(), level, "webhook delivery", attrs...)
}

// post sends the signed delivery and answers its status and header (the body is drained, at
// most 64 KiB, to reuse the connection).
func (d *Deliveries) post(ctx context.Context, w models.Webhook, del models.Delivery, ts int64, body []byte) (int, http.Header, error) {
	// During a rotation's overlap both secrets sign, so receivers may switch at any moment.
	sig, err := webhooks.SignAll(w.SigningSecrets(time.Unix(ts, 0)), del.MsgID, ts, body)
	if err != nil {
		return 0, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", d.cfg.UserAgent)
	req.Header.Set("webhook-id", del.MsgID)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("webhook-signature", sig)
	resp, err := d.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return resp.StatusCode, resp.Header, nil
}

// deliveryError turns a failed request into the text kept with the attempt, without the URL
// (which may carry credentials).
func deliveryError(err error, timeout time.Duration) string {
	var msg string
	var ne net.Error
	switch {
	case errors.Is(err, outbound.ErrRefused):
		// The same words whatever the address and whether anything listens there.
		msg = outbound.ErrRefused.Error() + " (OWED_WEBHOOKS_ALLOW_PRIVATE is off)"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		msg = "timed out after " + timeout.String()
	default:
		msg = err.Error()
		var ue *url.Error
		if errors.As(err, &ue) {
			msg = ue.Err.Error()
		}
	}
	if len(msg) > maxDeliveryErrorLen {
		msg = msg[:maxDeliveryErrorLen]
	}
	return msg
}

// jitter spreads d by ±DeliveryJitter.
func jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (1 - DeliveryJitter + 2*DeliveryJitter*rand.Float64()))
}
