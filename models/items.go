package models

import (
	"context"
	"strconv"
)

// ItemDeliveries lists the webhook deliveries an item's events caused, newest first, at most
// limit, without payloads. Found by the payload's first fields (kind and id, or revisionId), so
// it reads every kept delivery: fine for one admin's page.
func (s *Store) ItemDeliveries(ctx context.Context, kind Kind, itemID int64, limit int) ([]Delivery, error) {
	id := strconv.FormatInt(itemID, 10)
	item := `%"data":{"kind":"` + string(kind) + `","id":` + id + `,%`
	scored := item // a comment or a pitch has no score
	if kind == KindRevision {
		scored = `%"data":{"revisionId":` + id + `,%`
	}
	out, err := fetch[[]Delivery](ctx, s, s.read, `SELECT `+deliveryHeadColumns+` FROM webhook_deliveries
		WHERE payload LIKE ? OR payload LIKE ? ORDER BY id DESC LIMIT ?`, item, scored, max(limit, 0))
	return out, wrap(err, "deliveries of %s %d", kind, itemID)
}
