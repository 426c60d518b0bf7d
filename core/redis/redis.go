// Package redis is the core's one client of Redis: it writes the seat-map
// cache, one availability bitmap per live seated event, that the gateway
// serves. The key and the bit encoding are shared/seatmap's; PostgreSQL
// decides every seat, and this cache only lets the gateway draw the map
// without asking the core, at most a rebuild interval stale.
package redis

import (
	"context"
	"errors"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/onsale/onsale/shared/redisconn"
	"github.com/onsale/onsale/shared/seatmap"
)

// SeatMaps writes seat-map bitmaps.
type SeatMaps struct {
	rdb goredis.UniversalClient
}

// Open connects to url (see redisconn.Options: redis://host:port/db, or a
// cluster's host:port list) and checks that it answers.
func Open(ctx context.Context, url string) (*SeatMaps, error) {
	if _, err := redisconn.Options(url); err != nil {
		return nil, configError{err}
	}
	rdb, err := redisconn.Open(ctx, url)
	if err != nil {
		return nil, err
	}
	return &SeatMaps{rdb: rdb}, nil
}

// configError is an Open error that no retry can fix: a malformed address.
type configError struct{ error }

func (e configError) Unwrap() error { return e.error }

// IsConfigError reports whether Open failed on its address rather than on
// reaching Redis (which may answer later).
func IsConfigError(err error) bool {
	var c configError
	return errors.As(err, &c)
}

// Close closes the client.
func (m *SeatMaps) Close() error { return m.rdb.Close() }

// Mark sets the bits of the seats at positions: 1 when they became
// available, 0 when they were taken. One pipelined round trip; SETBIT
// numbers bits as shared/seatmap does.
func (m *SeatMaps) Mark(ctx context.Context, event int64, positions []int, available bool) error {
	bit := 0
	if available {
		bit = 1
	}
	key := seatmap.Key(event)
	_, err := m.rdb.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for _, i := range positions {
			p.SetBit(ctx, key, int64(i), bit)
		}
		return nil
	})
	return err
}

// Replace writes an event's whole bitmap: capacity seats, the ones at free
// set. It expires after ttl unless replaced again, so the map of an event
// no core keeps any more disappears.
func (m *SeatMaps) Replace(ctx context.Context, event int64, capacity int, free []int, ttl time.Duration) error {
	bits := seatmap.New(capacity)
	for _, pos := range free {
		// A position past the layout's capacity is no seat the gateway
		// draws; the bitmap's last byte has padding bits for it, and
		// seatmap.Set would set them, so a count of the bitmap would
		// report seats that do not exist.
		if pos < capacity {
			seatmap.Set(bits, pos)
		}
	}
	return m.rdb.Set(ctx, seatmap.Key(event), bits, ttl).Err()
}
