package api

import (
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/owed/owed/models"
)

// ticketTTL is how long a stream ticket is valid (it is also used once).
const ticketTTL = 60 * time.Second

// ticketPath is the one route a ticket signs in: the stream, for EventSource (no Authorization).
const ticketPath = "/api/listeners/mine/stream"

// ticketJSON is a stream ticket.
type ticketJSON struct {
	Ticket    string    `json:"ticket" description:"for GET /api/listeners/mine/stream?ticket=…: valid until expiresAt, once"`
	ExpiresAt timestamp `json:"expiresAt"`
}

// createTicket gives the caller a ticket for one stream: valid 60 s, used once, bound to the
// credential that asked; 429 at the caller's cap of streams, as the stream would.
func (a *API) createTicket(c echo.Context) error {
	u := caller(c)
	cred := credOf(c)
	if cred.Kind == "" {
		return errUnauthorized
	}
	if a.atUserCap(u.ID) { // the stream it is for would be refused
		return retryAfter(c, capRetryAfter, errTooManyStreams)
	}
	t, exp, err := a.Store.CreateStreamTicket(c.Request().Context(), u.ID, cred, ticketTTL)
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusOK, ticketJSON{Ticket: t, ExpiresAt: timeStr(exp)})
}

// ticketAuth signs a stream in with a ticket, used up whatever happens next, then checks its
// credential as a bearer's; a bad, used or expired ticket is 401.
func (a *API) ticketAuth(c echo.Context, ticket string, next echo.HandlerFunc) error {
	ctx := c.Request().Context()
	userID, cred, err := a.Store.TakeStreamTicket(ctx, ticket)
	if errors.Is(err, models.ErrNotFound) {
		return errBadTicket
	} else if err != nil {
		return err
	}
	u, _, err := a.Store.CheckCredential(ctx, userID, cred)
	if errors.Is(err, models.ErrNotFound) {
		return errBadTicket
	} else if err != nil {
		return err
	}
	c.Set(userKey, &u)
	c.Set(credKey, cred)
	return next(c)
}

var errBadTicket = &Error{Status: http.StatusUnauthorized, Code: "unauthorized", Message: "that ticket is not valid (unknown, used, expired, or its credential revoked)", Field: "ticket"}
