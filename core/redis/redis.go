// Package redis is the core's one client of Redis: it writes the seat-map
// cache, one availability bitmap per live seated event, that the gateway
// serves. PostgreSQL decides every seat; this cache only lets the gateway
// draw the map without asking the core, at most a rebuild interval stale.
package redis

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// SeatMaps writes seat-map bitmaps.
type SeatMaps struct {
	rdb goredis.UniversalClient
}

// Open connects to one server (redis://host:port/db) or a cluster (a
// comma-separated host:port list) and checks that it answers.
func Open(ctx context.Context, url string) (*SeatMaps, error) {
	opts := goredis.UniversalOptions{Addrs: strings.Split(url, ","), IsClusterMode: true}
	if u, err := goredis.ParseURL(url); err == nil {
		opts = goredis.UniversalOptions{Addrs: []string{u.Addr}, DB: u.DB, Username: u.Username, Password: u.Password}
	}
	// The cache is best effort: a slow Redis must never slow a hold.
	opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout = time.Second, 500*time.Millisecond, 500*time.Millisecond
	rdb := goredis.NewUniversalClient(&opts)
	if err := rdb.Ping(ctx).Err(); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("redis: %w", err)
	}
	return &SeatMaps{rdb: rdb}, nil
}

// Close closes the client.
func (m *SeatMaps) Close() error { return m.rdb.Close() }

// Key is the Redis key of an event's availability bitmap.
func Key(event int64) string { return "{evt:" + strconv.FormatInt(event, 10) + "}:seatmap" }

// Mark sets the bits of the seats at positions: 1 when they became
// available, 0 when they were taken. One pipelined round trip.
func (m *SeatMaps) Mark(ctx context.Context, event int64, positions []int, available bool) error {
	bit := 0
	if available {
		bit = 1
	}
	key := Key(event)
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
	return m.rdb.Set(ctx, Key(event), bitmap(capacity, free), ttl).Err()
}

// bitmap encodes free positions as Redis numbers bits: bit pos of the
// string, most significant bit of each byte first (as SETBIT does).
func bitmap(capacity int, free []int) []byte {
	bits := make([]byte, (capacity+7)/8)
	for _, pos := range free {
		if pos >= 0 && pos < capacity {
			bits[pos/8] |= 0x80 >> (pos % 8)
		}
	}
	return bits
}
