// Package seed holds the demo catalog: the embedded layouts of a 40,000-seat
// stadium, a 250-seat cinema screen and a 2,000-ticket GA amphitheatre, and
// the events the seed command creates on them.
package seed

import (
	"embed"
	"fmt"
	"time"

	"github.com/onsale/onsale/core"
	"github.com/onsale/onsale/core/layout"
)

//go:embed layouts/*.json
var layouts embed.FS

// Layout returns an embedded layout by name: "stadium", "cinema" or "amphitheatre".
func Layout(name string) (*layout.Layout, error) {
	b, err := layouts.ReadFile("layouts/" + name + ".json")
	if err != nil {
		return nil, fmt.Errorf("seed layout %q: %w", name, err)
	}
	return layout.ParseBytes(b)
}

// MustLayout is Layout for embedded layouts known to be valid.
func MustLayout(name string) *layout.Layout {
	l, err := Layout(name)
	if err != nil {
		panic(err)
	}
	return l
}

// EventSpec is an entry of the catalog: an event on one of its layouts
// (the type lives in core/layout so the store can create one without
// importing the demo catalog).
type EventSpec = layout.EventSpec

// IST is India Standard Time, the zone of every demo venue.
var IST = time.FixedZone("IST", 5*3600+1800)

// Demo returns the demo catalog relative to now: the stadium concert going
// on sale at the next 12:00 noon IST and playing a week later, a GA show,
// and cinema shows today and tomorrow.
func Demo(now time.Time) []EventSpec {
	n := now.In(IST)
	noon := time.Date(n.Year(), n.Month(), n.Day(), 12, 0, 0, 0, IST)
	if !noon.After(n) {
		noon = noon.AddDate(0, 0, 1)
	}
	day := func(d, h, m int) time.Time {
		return time.Date(n.Year(), n.Month(), n.Day()+d, h, m, 0, 0, IST)
	}
	specs := []EventSpec{
		{Name: "Arijit Singh Live", Kind: core.KindConcert, OnsaleAt: noon,
			StartsAt: time.Date(noon.Year(), noon.Month(), noon.Day()+7, 19, 30, 0, 0, IST), Layout: MustLayout("stadium")},
		{Name: "Prateek Kuhad: Open Air", Kind: core.KindConcert, OnsaleAt: noon,
			StartsAt: time.Date(noon.Year(), noon.Month(), noon.Day()+3, 20, 0, 0, 0, IST), Layout: MustLayout("amphitheatre")},
	}
	for d := 0; d < 2; d++ {
		for _, t := range [][2]int{{18, 30}, {21, 45}} {
			specs = append(specs, EventSpec{Name: "Monsoon Nights (U/A)", Kind: core.KindMovie,
				OnsaleAt: day(d-2, 9, 0), StartsAt: day(d, t[0], t[1]), HoldSeconds: 300, Layout: MustLayout("cinema")})
		}
	}
	return specs
}

// ScaledStadium is the stadium with rows cut so it holds about seats seats
// (every block and band kept, rows of 100): the demo's smaller sale.
func ScaledStadium(seats int) *layout.Layout {
	l := MustLayout("stadium")
	perBlock := max(1, (seats+len(l.Sections)-1)/len(l.Sections))
	rows := max(1, (perBlock+99)/100)
	for i := range l.Sections {
		if rows < len(l.Sections[i].Rows) {
			l.Sections[i].Rows = l.Sections[i].Rows[:rows]
		}
	}
	return l
}

// LayoutJSON returns an embedded layout's document as it is stored: what
// an operator imports.
func LayoutJSON(name string) ([]byte, error) {
	b, err := layouts.ReadFile("layouts/" + name + ".json")
	if err != nil {
		return nil, fmt.Errorf("seed layout %q: %w", name, err)
	}
	return b, nil
}
