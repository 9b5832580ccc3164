package models

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"gorm.io/gorm/schema"
)

// Every time column holds epoch milliseconds (UTC); the domain types hold time.Time, converted
// by `serializer:unixms` for rows GORM scans and by row.time/row.timep for rows read by hand.

func init() { schema.RegisterSerializer("unixms", unixMillis{}) }

// TimeFormat is how owed writes a time for others: RFC 3339 in UTC, with milliseconds.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// unixMillis serializes a time.Time or *time.Time as epoch milliseconds (NULL: zero or nil).
type unixMillis struct{}

// Scan sets the field from a column's epoch milliseconds.
func (unixMillis) Scan(ctx context.Context, field *schema.Field, dst reflect.Value, dbValue any) error {
	fv := field.ReflectValueOf(ctx, dst)
	if dbValue == nil {
		fv.Set(reflect.Zero(field.FieldType))
		return nil
	}
	ms, ok := millisOf(dbValue)
	if !ok {
		return fmt.Errorf("column %s: %T is not epoch milliseconds", field.DBName, dbValue)
	}
	t := fromMillis(ms)
	if field.FieldType.Kind() == reflect.Pointer {
		fv.Set(reflect.ValueOf(&t))
	} else {
		fv.Set(reflect.ValueOf(t))
	}
	return nil
}

// Value is the field as epoch milliseconds, or NULL for a nil or zero time.
func (unixMillis) Value(_ context.Context, _ *schema.Field, _ reflect.Value, fieldValue any) (any, error) {
	switch v := fieldValue.(type) {
	case time.Time:
		return millisOrNil(&v), nil
	case *time.Time:
		return millisOrNil(v), nil
	}
	return nil, fmt.Errorf("unixms: %T is not a time", fieldValue)
}

// fromMillis is the UTC time of epoch milliseconds.
func fromMillis(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// millisOrNil is a time as an argument for a time column: epoch milliseconds, or NULL for nil or zero.
func millisOrNil(t *time.Time) any {
	if t == nil || t.IsZero() {
		return nil
	}
	return t.UnixMilli()
}

// millisOf reads an integer column as the drivers hand it.
func millisOf(v any) (int64, bool) {
	r := row{vals: []any{v}}
	n := r.int64(0)
	return n, r.err == nil
}

// time converts an epoch-milliseconds column.
func (r *row) time(i int) time.Time { return fromMillis(r.int64(i)) }

// timep converts a nullable epoch-milliseconds column.
func (r *row) timep(i int) *time.Time {
	if r.vals[i] == nil {
		return nil
	}
	t := r.time(i)
	return &t
}
