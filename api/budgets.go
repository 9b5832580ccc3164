package api

import (
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/owed/owed/models"
)

// budgetRowJSON is an author's spend today against their limit.
type budgetRowJSON struct {
	UserID   int64     `json:"userId"`
	Name     string    `json:"name"`
	Limit    int64     `json:"limit"`
	Spent    int64     `json:"spent"`
	ResetsAt timestamp `json:"resetsAt"`
}

type budgetListJSON struct {
	Budgets    []budgetRowJSON `json:"budgets"`
	NextCursor *string         `json:"nextCursor"`
}

// listBudgets shows each author's spend today against their limit.
func (a *API) listBudgets(c echo.Context) error {
	limit, after, err := idPage(c, 200, 1000)
	if err != nil {
		return err
	}
	now := a.now()
	rows, err := a.Store.Budgets(c.Request().Context(), now, after, limit)
	if err != nil {
		return err
	}
	resets := timeStr(models.BudgetReset(now))
	budgets, next := pageOf(rows, limit, func(r models.BudgetRow) budgetRowJSON {
		return budgetRowJSON{UserID: r.UserID, Name: r.Name, Limit: r.DailyLimit, Spent: r.Spent, ResetsAt: resets}
	}, func(r models.BudgetRow) any { return idCursor{r.UserID} })
	return c.JSON(http.StatusOK, budgetListJSON{budgets, next})
}

type budgetRequest struct {
	// Raw, so that a body without it is refused rather than read as null (the default).
	DailyLimit json.RawMessage `json:"dailyLimit" required:"true" type:"integer|null" minimum:"0" maximum:"1000000" description:"a whole number, or null for the default"`
}

// setBudget sets a user's own daily limit; null returns them to the default.
func (a *API) setBudget(c echo.Context) error {
	var req budgetRequest
	id, err := pathIDAndBody(c, &req)
	if err != nil {
		return err
	}
	const msg = "dailyLimit must be a whole number between 0 and 1000000, or null for the default"
	if len(req.DailyLimit) == 0 {
		return invalid("dailyLimit", "dailyLimit is required: "+msg)
	}
	var limit *int64
	if err := json.Unmarshal(req.DailyLimit, &limit); err != nil || (limit != nil && (*limit < 0 || *limit > 1_000_000)) {
		return invalid("dailyLimit", msg)
	}
	ctx := c.Request().Context()
	var u models.User
	err = a.Store.WithTx(ctx, func(tx *models.Store) error {
		was, err := tx.UserByID(ctx, id)
		if err != nil {
			return err
		}
		if u, err = tx.SetDailyLimit(ctx, id, limit); err != nil {
			return err
		}
		// Raising the limit lets the author's jobs waiting for their budget run now, if today's
		// rest now covers them: they are made due at once rather than at the next reset.
		if _, err := tx.RetryJobs(ctx, models.JobFilter{UserID: id, Why: models.WhyBudget}); err != nil {
			return err
		}
		return audit(c, tx, models.AuditBudget, target("user", id), map[string]any{"dailyLimit": was.OwnLimit, "effective": was.DailyLimit},
			map[string]any{"dailyLimit": u.OwnLimit, "effective": u.DailyLimit})
	})
	if err != nil {
		return err
	}
	if a.Content != nil {
		a.Content.Wake()
	}
	now := a.now()
	spent, err := a.Store.Spent(ctx, u.ID, now)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, budgetRowJSON{UserID: u.ID, Name: u.Name, Limit: u.DailyLimit, Spent: spent, ResetsAt: timeStr(models.BudgetReset(now))})
}
