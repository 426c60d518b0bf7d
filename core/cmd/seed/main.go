// Command seed creates the demo catalog: the 40,000-seat stadium concert,
// a GA show and cinema shows. Events already present (same name and start)
// are left alone; -reset empties the catalog first. It prints the events, as
// JSON lines with -json so scripts can pick ids.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/onsale/onsale/core"
	"github.com/onsale/onsale/core/postgres"
	"github.com/onsale/onsale/core/seed"
	"github.com/onsale/onsale/shared/config"
)

// Config is the seed command's configuration (shared/config).
type Config struct {
	DatabaseURL  string   `env:"DATABASE_URL" flag:"database-url" secret:"url" help:"PostgreSQL URL (required)"`
	Reset        bool     `env:"ONSALE_SEED_RESET" flag:"reset" default:"false" help:"delete every venue, event, seat and hold first"`
	JSON         bool     `env:"ONSALE_SEED_JSON" flag:"json" default:"false" help:"print the events as JSON lines instead of a table"`
	HoldSeconds  int      `env:"ONSALE_SEED_CONCERT_HOLD_SECONDS" flag:"concert-hold-seconds" default:"0" min:"0" max:"86400" help:"hold time of the concerts' holds, in seconds (0: the default 480 s; the demo compresses time)"`
	StadiumSeats int      `env:"ONSALE_SEED_STADIUM_SEATS" flag:"stadium-seats" default:"40000" min:"1" max:"40000" help:"seats of the stadium concert: fewer cuts rows from every block (the demo's smaller scale)"`
	OnsaleIn     OnsaleIn `env:"ONSALE_SEED_ONSALE_IN" flag:"onsale-in" help:"put the concerts on sale this long from now (duration: 0s for now, 30s, -1m for a minute ago) instead of at the next noon IST when empty"`
}

// OnsaleIn is an optional duration: unset keeps the catalog's on-sale time.
type OnsaleIn struct {
	D   time.Duration
	Set bool
}

// UnmarshalText parses a duration; an empty text unsets it.
func (o *OnsaleIn) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*o = OnsaleIn{}
		return nil
	}
	d, err := time.ParseDuration(string(b))
	if err != nil {
		return errors.New("not a duration (like 0s, 30s, 5m)")
	}
	*o = OnsaleIn{D: d, Set: true}
	return nil
}

// MarshalText is the inverse of UnmarshalText.
func (o OnsaleIn) MarshalText() ([]byte, error) {
	if !o.Set {
		return nil, nil
	}
	return []byte(o.D.String()), nil
}

// Validate checks the rules across settings.
func (c *Config) Validate() error {
	if c.DatabaseURL == "" {
		return errors.New("DATABASE_URL (or -database-url) is required")
	}
	return nil
}

func main() {
	var c Config
	if code := config.Status("seed", &c); code >= 0 {
		os.Exit(code)
	}
	if err := run(context.Background(), c); err != nil {
		fmt.Fprintln(os.Stderr, "seed:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, c Config) error {
	db, err := postgres.Open(ctx, c.DatabaseURL, postgres.Options{})
	if err != nil {
		return err
	}
	defer db.Close()
	if c.Reset {
		if err := db.ResetCatalog(ctx); err != nil {
			return fmt.Errorf("reset: %w", err)
		}
	}
	now := time.Now()
	out := json.NewEncoder(os.Stdout)
	for _, s := range seed.Demo(now) {
		if s.Layout.Capacity() == 40000 && c.StadiumSeats < 40000 {
			s.Layout = seed.ScaledStadium(c.StadiumSeats)
		}
		if c.HoldSeconds > 0 && s.Kind == core.KindConcert {
			s.HoldSeconds = c.HoldSeconds
		}
		if c.OnsaleIn.Set && s.Kind == core.KindConcert {
			s.OnsaleAt = now.Add(c.OnsaleIn.D).Truncate(time.Second)
		}
		id, err := db.EventID(ctx, s.Name, s.StartsAt)
		if err != nil {
			return err
		}
		existed := id != 0
		if !existed {
			if id, err = db.CreateEvent(ctx, s); err != nil {
				return err
			}
		}
		if c.JSON {
			_ = out.Encode(map[string]any{"id": id, "name": s.Name, "kind": s.Kind, "venue": s.Layout.Venue.Name,
				"capacity": s.Layout.Capacity(), "seated": s.Layout.Seated(), "onsale_at": s.OnsaleAt, "starts_at": s.StartsAt, "existed": existed})
			continue
		}
		what := "seats"
		if !s.Layout.Seated() {
			what = "GA tickets"
		}
		fmt.Printf("  event %3d  %-8s %-26s %-30s %6d %-10s on sale %s, starts %s\n", id, s.Kind, s.Name, s.Layout.Venue.Name,
			s.Layout.Capacity(), what, s.OnsaleAt.In(seed.IST).Format("Jan 2 15:04"), s.StartsAt.In(seed.IST).Format("Jan 2 15:04 IST"))
	}
	return nil
}
