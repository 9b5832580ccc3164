package api

import (
	"errors"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/owed/owed/models"
)

type userRequest struct {
	Name string      `json:"name" required:"true" maxLength:"100"`
	Role models.Role `json:"role" required:"true" enum:"role"`
}

// userCreatedJSON is a user with its token, shown only when it is made.
type userCreatedJSON struct {
	ID    int64       `json:"id"`
	Name  string      `json:"name"`
	Role  models.Role `json:"role" enum:"role"`
	Token string      `json:"token" description:"the token, shown only now"`
}

type userListJSON struct {
	NextCursor *string         `json:"nextCursor"`
	Users      []userAdminJSON `json:"users"`
}

// createUser adds a user and shows its token, once.
func (a *API) createUser(c echo.Context) error {
	var req userRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	req.Name = strings.TrimSpace(req.Name)
	if req.Name == "" {
		return invalid("name", "name is required")
	}
	if !utf8.ValidString(req.Name) || strings.ContainsRune(req.Name, 0) || utf8.RuneCountInString(req.Name) > 100 {
		return invalid("name", "name must be UTF-8 text of at most 100 characters, without NUL bytes")
	}
	if !models.ValidRole(req.Role) {
		return invalid("role", "role must be author, bot or admin")
	}
	var u models.User
	var token string
	err := a.Store.WithTx(c.Request().Context(), func(tx *models.Store) error {
		var err error
		if u, token, err = tx.CreateUser(c.Request().Context(), req.Name, req.Role); err != nil {
			return err
		}
		return audit(c, tx, models.AuditUserCreate, target("user", u.ID), nil, map[string]any{"name": u.Name, "role": u.Role})
	})
	if errors.Is(err, models.ErrNameTaken) {
		return &Error{Status: http.StatusConflict, Code: "conflict", Field: "name",
			Message: "another user has this name (names are unique regardless of case)"}
	} else if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, userCreatedJSON{u.ID, u.Name, u.Role, token})
}

// userAdminJSON is a user as an admin sees it.
type userAdminJSON struct {
	ID        int64       `json:"id"`
	Name      string      `json:"name"`
	Role      models.Role `json:"role" enum:"role"`
	Disabled  bool        `json:"disabled"`
	CreatedAt timestamp   `json:"createdAt"`
}

func userAdminOf(u models.User) userAdminJSON {
	return userAdminJSON{ID: u.ID, Name: u.Name, Role: u.Role, Disabled: u.Disabled, CreatedAt: timeStr(u.CreatedAt)}
}

// listUsers pages through every user (authors, bots, admins) with whether they are disabled.
func (a *API) listUsers(c echo.Context) error {
	limit, after, err := idPage(c, 200, 1000)
	if err != nil {
		return err
	}
	us, err := a.Store.ListUsers(c.Request().Context(), after, limit)
	if err != nil {
		return err
	}
	users, next := pageOf(us, limit, userAdminOf, func(u models.User) any { return idCursor{u.ID} })
	return c.JSON(http.StatusOK, userListJSON{next, users})
}

// rotateToken gives a user a new token, shown once in the answer. The old token and every
// session of the user stop working at once; an admin rotating their own token keeps the session
// they do it from.
func (a *API) rotateToken(c echo.Context) error {
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	keep := ""
	if caller(c).ID == id {
		if ck, err := c.Request().Cookie(sessionCookie); err == nil && ck.Value != "" {
			keep = models.HashToken(ck.Value)
		}
	}
	var u models.User
	var token string
	err = a.Store.WithTx(c.Request().Context(), func(tx *models.Store) error {
		var err error
		if u, token, err = tx.RotateToken(c.Request().Context(), id, keep); err != nil {
			return err
		}
		return audit(c, tx, models.AuditTokenRotate, target("user", id), nil, map[string]any{"name": u.Name, "sessionsEnded": true})
	})
	if err != nil {
		return err
	}
	a.Log.Info("token rotated", "userId", u.ID, "by", caller(c).ID)
	return c.JSON(http.StatusOK, userCreatedJSON{u.ID, u.Name, u.Role, token})
}

type userPatch struct {
	// Disabled is required; a pointer so a body without it is refused rather than read as false.
	Disabled *bool `json:"disabled" required:"true"`
}

var errLastAdmin = &Error{Status: http.StatusConflict, Code: "conflict", Field: "disabled",
	Message: "this is the last enabled admin: enable or create another admin first"}

// patchUser disables or enables a user (its credentials stop at once); not the last admin (409).
func (a *API) patchUser(c echo.Context) error {
	var req userPatch
	id, err := pathIDAndBody(c, &req)
	if err != nil {
		return err
	}
	if req.Disabled == nil {
		return invalid("disabled", "disabled is required: true or false")
	}
	var u models.User
	err = a.Store.WithTx(c.Request().Context(), func(tx *models.Store) error {
		was, err := tx.UserByID(c.Request().Context(), id)
		if err != nil {
			return err
		}
		if u, err = tx.SetDisabled(c.Request().Context(), id, *req.Disabled); err != nil {
			return err
		}
		action := models.AuditUserEnable
		if u.Disabled {
			action = models.AuditUserDisable
		}
		return audit(c, tx, action, target("user", id), map[string]any{"name": was.Name, "disabled": was.Disabled},
			map[string]any{"name": u.Name, "disabled": u.Disabled})
	})
	switch {
	case errors.Is(err, models.ErrConflict):
		return errLastAdmin
	case err != nil:
		return err
	}
	a.Log.Info("user disabled", "userId", u.ID, "disabled", u.Disabled, "by", caller(c).ID)
	return c.JSON(http.StatusOK, userAdminOf(u))
}
