package api

import (
	"errors"
	"math"
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"

	"github.com/owed/owed/models"
)

// anchorJSON is one item of the anchor set: its expected verdict, reference art (revisions), or both.
type anchorJSON struct {
	ID        int64           `json:"id"`
	Kind      models.Kind     `json:"kind" enum:"kind"`
	ItemID    int64           `json:"itemId"`
	Verdict   *models.Verdict `json:"verdict" enum:"verdict" description:"the verdict the live model is expected to keep; null: not a verdict anchor"`
	Art       *float64        `json:"art" minimum:"0" maximum:"1" description:"the reference art score (a revision's); null: not an art anchor"`
	CreatedAt timestamp       `json:"createdAt"`
}

type anchorListJSON struct {
	Anchors []anchorJSON `json:"anchors"`
}

type anchorAnswerJSON struct {
	Anchor anchorJSON `json:"anchor"`
}

// anchorRequest adds an item to the anchor set: at least one of verdict and art.
type anchorRequest struct {
	Kind    models.Kind     `json:"kind" required:"true" enum:"kind"`
	ItemID  int64           `json:"itemId" required:"true" minimum:"1"`
	Verdict *models.Verdict `json:"verdict" enum:"verdict" description:"the verdict expected of the item"`
	Art     *float64        `json:"art" minimum:"0" maximum:"1" description:"the reference art score; revisions only"`
}

func anchorOf(a models.Anchor) anchorJSON {
	return anchorJSON{ID: a.ID, Kind: a.Kind, ItemID: a.ItemID, Verdict: a.Verdict, Art: a.Art, CreatedAt: timeStr(a.CreatedAt)}
}

var errAnchorTaken = &Error{Status: http.StatusConflict, Code: "conflict", Field: "itemId",
	Message: "the item is an anchor already: delete that anchor first to change what is expected of it"}

// check validates an anchor request's values (not that its item exists).
func (r anchorRequest) check() error {
	switch {
	case !slices.Contains(models.Kinds, r.Kind):
		return invalid("kind", "kind must be revision, comment or pitch")
	case r.ItemID < 1:
		return invalid("itemId", "itemId must be an item's id, 1 or more")
	case r.Verdict == nil && r.Art == nil:
		return invalid("verdict", "give the expected verdict, the reference art, or both")
	case r.Verdict != nil && !slices.Contains(models.Verdicts, *r.Verdict):
		return invalid("verdict", "verdict must be allow or block")
	case r.Art != nil && (math.IsNaN(*r.Art) || *r.Art < 0 || *r.Art > 1):
		return invalid("art", "art must be from 0 to 1")
	case r.Art != nil && r.Kind != models.KindRevision:
		return invalid("art", "only a revision has an art score")
	}
	return nil
}

// listAnchors lists the anchor set, oldest first.
func (a *API) listAnchors(c echo.Context) error {
	as, err := a.Store.Anchors(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, anchorListJSON{Anchors: each(as, anchorOf)})
}

// addAnchor adds an existing item to the anchor set; an item already in it answers 409.
func (a *API) addAnchor(c echo.Context) error {
	var req anchorRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	if err := req.check(); err != nil {
		return err
	}
	ctx := c.Request().Context()
	if _, ok, err := a.Store.ScreenSubject(ctx, req.Kind, req.ItemID); err != nil {
		return err
	} else if !ok {
		return notFound(string(req.Kind))
	}
	var added models.Anchor
	err := a.Store.WithTx(ctx, func(tx *models.Store) error {
		var err error
		if added, err = tx.AddAnchor(ctx, models.Anchor{Kind: req.Kind, ItemID: req.ItemID, Verdict: req.Verdict, Art: req.Art}); err != nil {
			return err
		}
		return audit(c, tx, models.AuditAnchorAdd, target("anchor", added.ID), nil, anchorOf(added))
	})
	if errors.Is(err, models.ErrConflict) {
		return errAnchorTaken
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, anchorAnswerJSON{anchorOf(added)})
}

// deleteAnchor takes an anchor out of the set; past runs keep what they measured.
func (a *API) deleteAnchor(c echo.Context) error {
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	err = a.Store.WithTx(ctx, func(tx *models.Store) error {
		gone, err := tx.DeleteAnchor(ctx, id)
		if err != nil {
			return err
		}
		return audit(c, tx, models.AuditAnchorDelete, target("anchor", id), anchorOf(gone), nil)
	})
	if err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
