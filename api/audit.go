package api

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/owed/owed/models"
)

// auditEntryJSON is one operator action of the audit trail.
type auditEntryJSON struct {
	ID        int64           `json:"id"`
	At        timestamp       `json:"at"`
	AdminID   *int64          `json:"adminId" description:"who acted; null for owed itself"`
	AdminName string          `json:"adminName" description:"their name as it was then"`
	Action    string          `json:"action" enum:"auditAction"`
	Target    string          `json:"target" description:"what was acted on, e.g. job:12, user:3, revision:7, holds, model"`
	Before    json.RawMessage `json:"before" description:"what it was (null: nothing, or not known)"`
	After     json.RawMessage `json:"after" description:"what it became"`
}

type auditListJSON struct {
	Entries    []auditEntryJSON `json:"entries"`
	NextCursor *string          `json:"nextCursor"`
}

// auditQuery are the query parameters of GET /api/admin/audit.
type auditQuery struct {
	Action  string `query:"action" enum:"auditAction"`
	AdminID int64  `query:"adminId" minimum:"1"`
	Target  string `query:"target" maxLength:"200" pattern:"^[a-z][a-z-]*(:[A-Za-z0-9_.@-]{1,100})?$" description:"exactly, e.g. job:12"`
	Since   string `query:"since" format:"date-time" description:"at or after"`
	Until   string `query:"until" format:"date-time" description:"before"`
	pageQuery
}

// auditTarget is the shape of a target: a kind of thing, and which one.
var auditTarget = regexp.MustCompile(`^[a-z][a-z-]*(:[A-Za-z0-9_.@-]{1,100})?$`)

// auditActions lists every action the trail records.
var auditActions = []string{models.AuditHolds, models.AuditVerdict, models.AuditOverturn, models.AuditRetry, models.AuditRetryBulk,
	models.AuditTokenRotate, models.AuditUserDisable, models.AuditUserEnable, models.AuditUserCreate, models.AuditBudget,
	models.AuditWebhookCreate, models.AuditWebhookUpdate, models.AuditWebhookDelete, models.AuditBackfillStart,
	models.AuditBackfillPause, models.AuditBackfillSet, models.AuditWalkRelease, models.AuditProbe,
	models.AuditAppealDecide, models.AuditWebhookSecret, models.AuditReviewClaim, models.AuditReviewRelease,
	models.AuditAnchorAdd, models.AuditAnchorDelete,
	models.AuditModelPromote, models.AuditModelRollback}

func auditEntryOf(e models.AuditEntry) auditEntryJSON {
	out := auditEntryJSON{ID: e.ID, At: timeStr(e.At), AdminID: e.AdminID, AdminName: e.AdminName, Action: e.Action,
		Target: e.Target, Before: e.Before, After: e.After}
	if out.Before == nil {
		out.Before = json.RawMessage("null")
	}
	if out.After == nil {
		out.After = json.RawMessage("null")
	}
	return out
}

// audit records what the calling admin did on tx, inside WithTx so that both commit together.
func audit(c echo.Context, tx *models.Store, action, target string, before, after any) error {
	id, name := models.AuditBy(caller(c))
	return tx.Audit(c.Request().Context(), models.AuditEntry{AdminID: id, AdminName: name, Action: action, Target: target}, before, after)
}

// listAudit pages through the audit trail, newest first.
func (a *API) listAudit(c echo.Context) error {
	var f models.AuditFilter
	var err error
	if f.Action, err = oneOf(c, "action", auditActions...); err != nil {
		return err
	}
	if f.AdminID, err = queryID(c, "adminId"); err != nil {
		return err
	}
	f.Target = c.QueryParam("target")
	if f.Target != "" && !auditTarget.MatchString(f.Target) {
		return invalid("target", "target must name what was acted on, e.g. job:12, user:3, holds or model")
	}
	for _, p := range []struct {
		name string
		dst  *time.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		if v := c.QueryParam(p.name); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return invalid(p.name, p.name+" must be an RFC 3339 time")
			}
			*p.dst = t
		}
	}
	limit, before, err := idPage(c, 50, 500)
	if err != nil {
		return err
	}
	entries, err := a.Store.ListAudit(c.Request().Context(), f, before, limit)
	if err != nil {
		return err
	}
	out, next := pageOf(entries, limit, auditEntryOf, func(e models.AuditEntry) any { return idCursor{e.ID} })
	return c.JSON(http.StatusOK, auditListJSON{out, next})
}

// target names a thing of a kind (job, user, webhook, anchor, an item's kind) in the audit trail.
func target[K ~string](kind K, id int64) string {
	return string(kind) + ":" + strconv.FormatInt(id, 10)
}

// auditAfter records an action whose writes cannot share its transaction, just after it succeeded.
func (a *API) auditAfter(c echo.Context, action, target string, after any) error {
	return audit(c, a.Store, action, target, nil, after)
}

// backfillAuditTarget names the backfill queue, or one chat's job, in the audit trail.
func backfillAuditTarget(chat string) string {
	if chat == "" || !auditTarget.MatchString("backfill:"+chat) {
		return "backfill"
	}
	return "backfill:" + chat
}
