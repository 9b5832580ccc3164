package api

import (
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/owed/owed/models"
)

type userRequest struct {
	Name string `json:"name"`
	Role string `json:"role"`
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
	u, token, err := a.Store.CreateUser(c.Request().Context(), req.Name, req.Role)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, map[string]any{"id": u.ID, "name": u.Name, "role": u.Role, "token": token})
}
