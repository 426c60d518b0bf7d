// Command seed creates the demo catalog: the 40,000-seat stadium concert,
// a GA show and cinema shows. Events already present (same name and start)
// are left alone; -reset empties the catalog first. It prints the events, as
// JSON lines with -json so scripts can pick ids.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/onsale/onsale/core/postgres"
	"github.com/onsale/onsale/core/seed"
)

func main() {
	dbURL := flag.String("database-url", os.Getenv("DATABASE_URL"), "PostgreSQL URL (env DATABASE_URL)")
	reset := flag.Bool("reset", false, "delete every venue, event, seat and hold first")
	asJSON := flag.Bool("json", false, "print the events as JSON lines instead of a table")
	holdSeconds := flag.Int("concert-hold-seconds", 0, "hold time of the concerts' holds (0: the default 480 s; the demo compresses time)")
	stadiumSeats := flag.Int("stadium-seats", 40000, "seats of the stadium concert: fewer cuts rows from every block (the demo's smaller scale)")
	onsaleIn := flag.Duration("onsale-in", 0, "put the concerts on sale this long from now instead of at the next noon IST (e.g. 0s for now, 30s)")
	flag.Parse()
	if err := run(context.Background(), *dbURL, *reset, *asJSON, *onsaleIn, isSet("onsale-in"), *stadiumSeats, *holdSeconds); err != nil {
		fmt.Fprintln(os.Stderr, "seed:", err)
		os.Exit(1)
	}
}

func isSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func run(ctx context.Context, dbURL string, reset, asJSON bool, onsaleIn time.Duration, moveOnsale bool, stadiumSeats, holdSeconds int) error {
	if dbURL == "" {
		return fmt.Errorf("DATABASE_URL is required")
	}
	db, err := postgres.Open(ctx, dbURL, postgres.Options{})
	if err != nil {
		return err
	}
	defer db.Close()
	if reset {
		if err := db.ResetCatalog(ctx); err != nil {
			return fmt.Errorf("reset: %w", err)
		}
	}
	now := time.Now()
	out := json.NewEncoder(os.Stdout)
	for _, s := range seed.Demo(now) {
		if s.Layout.Capacity() == 40000 && stadiumSeats < 40000 {
			s.Layout = seed.ScaledStadium(stadiumSeats)
		}
		if holdSeconds > 0 && s.Kind == "concert" {
			s.HoldSeconds = holdSeconds
		}
		if moveOnsale && s.Kind == "concert" {
			s.OnsaleAt = now.Add(onsaleIn).Truncate(time.Second)
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
		if asJSON {
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
