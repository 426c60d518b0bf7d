package redis

import (
	"context"

	"github.com/onsale/onsale/shared/seatmap"
)

// Bitmap reads an event's bitmap as the gateway does.
func (m *SeatMaps) Bitmap(ctx context.Context, event int64) ([]byte, error) {
	return m.rdb.Get(ctx, seatmap.Key(event)).Bytes()
}

// Del removes an event's bitmap.
func (m *SeatMaps) Del(ctx context.Context, event int64) { m.rdb.Del(ctx, seatmap.Key(event)) }
