package redis

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/onsale/onsale/gateway/health"
)

//go:embed health.lua
var healthLua string

var healthScript = goredis.NewScript(healthLua)

// HealthKey is the hash of the factor shared by the gateways in front of
// the core at coreAddr (host:port): gateways that reach the core by the
// same address share one factor, and a test's fake core has its own.
func HealthKey(coreAddr string) string { return "onsale:health:" + coreAddr }

// Health is the core-health factor shared through one Redis hash
// (health.lua); it implements health.Exchanger.
type Health struct {
	s   *Store
	key string
}

var _ health.Exchanger = (*Health)(nil)

// Health returns the shared factor kept under key (HealthKey).
func (s *Store) Health(key string) *Health { return &Health{s: s, key: key} }

// Key is the hash's key.
func (h *Health) Key() string { return h.key }

// Exchange applies r to the shared factor (health.lua: at most one
// decrease and one increase per window across gateways) and returns it.
// One EVALSHA, whatever the verdict.
func (h *Health) Exchange(ctx context.Context, r health.Report) (health.Shared, error) {
	ru := r.Rule
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	v, err := healthScript.Run(ctx, h.s.rdb, []string{h.key}, string(r.Verdict.State), r.Window, ru.Window.Milliseconds(),
		r.Verdict.Reason, f(ru.Decrease), f(ru.Increase), f(ru.Floor), f(r.Seed)).Slice()
	if err != nil {
		return health.Shared{}, unavailable(err)
	}
	var factor, reason string
	var now, win, dec, inc, decs, incs int64
	if err := decode("health", v, &factor, &reason, &now, &win, &dec, &inc, &decs, &incs); err != nil {
		return health.Shared{}, err
	}
	fv, err := strconv.ParseFloat(factor, 64)
	if err != nil || !(fv >= 0 && fv <= 1) {
		return health.Shared{}, fmt.Errorf("redis: the health script answered a factor of %q", factor)
	}
	return health.Shared{Factor: fv, Reason: reason, Now: time.UnixMilli(now), Window: win, LastDecrease: dec,
		LastIncrease: inc, Decreases: decs, Increases: incs}, nil
}
