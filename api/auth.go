package api

import (
	"errors"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/owed/owed/models"
)

const (
	userKey       = "owed.user"
	credKey       = "owed.credential" // the models.Credential the caller was authenticated with
	sessionCookie = "owed_session"
	sessionTTL    = 12 * time.Hour
	// csrfHeader must accompany a browser's state-changing calls: a cross-site form cannot
	// send a custom header, and SameSite=Strict already keeps the cookie off cross-site calls.
	csrfHeader = "X-Owed-Request"
)

// authenticate finds the caller from a bearer token or a session cookie (neither: anonymous).
func (a *API) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		if h := req.Header.Get(echo.HeaderAuthorization); h != "" {
			token, ok := strings.CutPrefix(h, "Bearer ")
			if !ok || token == "" {
				return errUnauthorized
			}
			if req.URL.Path == ticketPath && req.URL.Query().Has("ticket") {
				return invalid("ticket", "give a ticket or an Authorization header, not both")
			}
			if err := a.earlyRefusal(c, token); err != nil {
				return err
			}
			u, err := a.Store.UserByToken(req.Context(), token)
			if errors.Is(err, models.ErrNotFound) {
				return errUnauthorized
			} else if err != nil {
				return err
			}
			c.Set(userKey, &u)
			c.Set(credKey, models.Credential{Kind: models.CredToken, Hash: models.HashToken(token)})
			return next(c)
		}
		if ticket := c.QueryParam("ticket"); ticket != "" && req.URL.Path == ticketPath {
			return a.ticketAuth(c, ticket, next)
		}
		if ck, err := req.Cookie(sessionCookie); err == nil && ck.Value != "" {
			u, err := a.Store.UserBySession(req.Context(), ck.Value)
			if errors.Is(err, models.ErrNotFound) {
				return next(c) // an expired session is simply signed out
			} else if err != nil {
				return err
			}
			if req.Method != http.MethodGet && req.Method != http.MethodHead && req.Header.Get(csrfHeader) == "" {
				return errCSRF
			}
			c.Set(userKey, &u)
			c.Set(credKey, models.Credential{Kind: models.CredSession, Hash: models.HashToken(ck.Value)})
		}
		return next(c)
	}
}

// caller is the authenticated user, or nil.
func caller(c echo.Context) *models.User {
	u, _ := c.Get(userKey).(*models.User)
	return u
}

// allow lets through callers with one of the roles: 401 for the anonymous, 403 for others.
func allow(roles ...models.Role) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			u := caller(c)
			if u == nil {
				return errUnauthorized
			}
			for _, r := range roles {
				if u.Role == r {
					return next(c)
				}
			}
			return errForbidden
		}
	}
}

type sessionRequest struct {
	Token string `json:"token" required:"true"`
}

// signIn exchanges a token for a session cookie (HttpOnly, SameSite=Strict).
func (a *API) signIn(c echo.Context) error {
	var req sessionRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	if req.Token == "" {
		return invalid("token", "token is required")
	}
	// Both limits are taken before the lookup, so guesses are limited too (by address).
	now := a.now()
	ok, wait := a.signIns.addr.take(addrKey(c.RealIP()), now)
	if ok {
		ok, wait = a.signIns.toks.take(models.HashToken(req.Token), now)
	}
	if !ok {
		e, secs := tooManySignIns(wait)
		c.Response().Header().Set("Retry-After", secs)
		return e
	}
	u, err := a.Store.UserByToken(c.Request().Context(), req.Token)
	if errors.Is(err, models.ErrNotFound) {
		return &Error{Status: http.StatusUnauthorized, Code: "unauthorized", Message: "that token is not valid", Field: "token"}
	} else if err != nil {
		return err
	}
	id, err := a.Store.CreateSession(c.Request().Context(), u.ID, sessionTTL)
	if err != nil {
		return err
	}
	c.SetCookie(&http.Cookie{Name: sessionCookie, Value: id, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: a.overTLS(c), MaxAge: int(sessionTTL.Seconds())})
	return c.NoContent(http.StatusNoContent)
}

// session answers who is signed in.
func (a *API) session(c echo.Context) error {
	u := caller(c)
	if u == nil {
		return errUnauthorized
	}
	return c.JSON(http.StatusOK, sessionJSON{userOf(u)})
}

// signOut ends the session and clears the cookie.
func (a *API) signOut(c echo.Context) error {
	if ck, err := c.Request().Cookie(sessionCookie); err == nil && ck.Value != "" {
		if err := a.Store.DeleteSession(c.Request().Context(), ck.Value); err != nil {
			return err
		}
		if u := caller(c); u != nil {
			// This process's streams and long polls of the session end now (PostgreSQL's
			// trigger tells every replica; SQLite has only this one).
			a.Notify.Changed(u.ID)
		}
	}
	c.SetCookie(&http.Cookie{Name: sessionCookie, Value: "", Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: a.overTLS(c), MaxAge: -1})
	return c.NoContent(http.StatusNoContent)
}

// overTLS reports whether the browser reached owed over https: OWED_PUBLIC_URL says so, the
// connection is TLS, or a trusted proxy's X-Forwarded-Proto says https (anyone else's is not
// believed).
func (a *API) overTLS(c echo.Context) bool {
	if a.SecureCookies || c.IsTLS() {
		return true
	}
	if a.TrustedProxy == nil || !strings.EqualFold(c.Request().Header.Get(echo.HeaderXForwardedProto), "https") {
		return false
	}
	host, _, err := net.SplitHostPort(c.Request().RemoteAddr)
	if err != nil {
		host = c.Request().RemoteAddr
	}
	ip := net.ParseIP(host)
	return ip != nil && a.TrustedProxy(ip)
}

// sessionJSON says who is signed in.
type sessionJSON struct {
	User userJSON `json:"user"`
}

type userJSON struct {
	ID   int64       `json:"id"`
	Name string      `json:"name"`
	Role models.Role `json:"role" enum:"role"`
}

func userOf(u *models.User) userJSON { return userJSON{u.ID, u.Name, u.Role} }
