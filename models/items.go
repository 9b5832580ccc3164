package models

import (
	"context"
	"fmt"
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
	var out []Delivery
	if err := s.scan(ctx, s.read, &out, `SELECT `+deliveryHeadColumns+` FROM webhook_deliveries
		WHERE payload LIKE ? OR payload LIKE ? ORDER BY id DESC LIMIT ?`, item, scored, max(limit, 0)); err != nil {
		return nil, fmt.Errorf("deliveries of %s %d: %w", kind, itemID, err)
	}
	return out, nil
}
