// Package layout reads seat layouts: a venue's sections, rows, seat numbers
// and price bands as a JSON document, expanded to one seat per place.
package layout

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// Layout is a venue plan with prices. A seated layout has Sections; a GA
// layout has GeneralAdmission and no sections.
type Layout struct {
	Venue            Venue             `json:"venue"`
	Bands            []Band            `json:"bands"`
	Sections         []Section         `json:"sections,omitempty"`
	GeneralAdmission *GeneralAdmission `json:"general_admission,omitempty"`
}

// Venue names where the layout is.
type Venue struct {
	Name     string `json:"name"`
	City     string `json:"city"`
	Timezone string `json:"timezone"`
}

// Band is a price band; PricePaise is per ticket, in paise.
type Band struct {
	Code       string `json:"code"`
	Name       string `json:"name"`
	PricePaise int64  `json:"price_paise"`
}

// Section is a block of rows, e.g. "North Stand Lower, block 1". Band is the
// default band of its rows.
type Section struct {
	Code string `json:"code"`
	Name string `json:"name"`
	Band string `json:"band"`
	Rows []Row  `json:"rows"`
}

// Row lists its seat numbers either as a range From..To or explicitly in
// Numbers (for rows with gaps). Band overrides the section's band.
type Row struct {
	Label   string `json:"label"`
	From    int    `json:"from,omitempty"`
	To      int    `json:"to,omitempty"`
	Numbers []int  `json:"numbers,omitempty"`
	Band    string `json:"band,omitempty"`
}

// GeneralAdmission is an unnumbered capacity in one band.
type GeneralAdmission struct {
	Capacity int    `json:"capacity"`
	Band     string `json:"band"`
}

// Seat is one place of a seated layout. Pos is its index in layout order
// (sections, then rows, then numbers), the bit it owns in availability
// bitmaps; RowNo is the row's index in its section, 0 nearest the stage.
type Seat struct {
	ID      string
	Pos     int
	Section string
	Row     string
	RowNo   int
	Number  int
	Band    string
}

// SeatID is the id of seat number in row of section: "NL1-J-14".
func SeatID(section, row string, number int) string {
	return fmt.Sprintf("%s-%s-%d", section, row, number)
}

// Parse reads and validates a layout document; unknown fields are errors.
func Parse(r io.Reader) (*Layout, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var l Layout
	if err := dec.Decode(&l); err != nil {
		return nil, fmt.Errorf("parse layout: %w", err)
	}
	if err := l.Validate(); err != nil {
		return nil, err
	}
	return &l, nil
}

// ParseBytes is Parse over a byte slice.
func ParseBytes(b []byte) (*Layout, error) { return Parse(bytes.NewReader(b)) }

// ReadFile parses the layout in a file.
func ReadFile(path string) (*Layout, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Parse(f)
}

// MaxCapacity bounds the places of one layout. The largest stadiums sell
// about 150,000; the bound is there so that a mistyped range ("to":
// 2000000000) is refused before Seats expands it to billions of seats, and
// so that the sum of the rows cannot overflow int.
const MaxCapacity = 1_000_000

// Validate checks that bands are defined once with a non-negative price,
// every seat names a known band, seat ids are unique, a layout is either
// seated or GA, and it has 1 to MaxCapacity places.
func (l *Layout) Validate() error {
	if l.Venue.Name == "" || l.Venue.City == "" {
		return fmt.Errorf("layout: venue name and city are required")
	}
	bands := make(map[string]bool)
	for _, b := range l.Bands {
		if b.Code == "" || b.PricePaise < 0 || bands[b.Code] {
			return fmt.Errorf("layout: band %q: empty, duplicate or negative price", b.Code)
		}
		bands[b.Code] = true
	}
	switch {
	case l.GeneralAdmission != nil && len(l.Sections) > 0:
		return fmt.Errorf("layout: both sections and general_admission")
	case l.GeneralAdmission != nil:
		if l.GeneralAdmission.Capacity <= 0 || !bands[l.GeneralAdmission.Band] {
			return fmt.Errorf("layout: general_admission needs a capacity and a known band")
		}
		if l.GeneralAdmission.Capacity > MaxCapacity {
			return fmt.Errorf("layout: general_admission capacity over %d", MaxCapacity)
		}
		return nil
	case len(l.Sections) == 0:
		return fmt.Errorf("layout: no sections and no general_admission")
	}
	places := 0
	for _, sec := range l.Sections {
		if sec.Code == "" {
			return fmt.Errorf("layout: section without a code")
		}
		for _, r := range sec.Rows {
			if r.Label == "" || (len(r.Numbers) == 0 && (r.From <= 0 || r.To < r.From)) {
				return fmt.Errorf("layout: section %s: row %q needs a label and seats", sec.Code, r.Label)
			}
			// each term and the sum stay within MaxCapacity, so nothing overflows
			if n := r.count(); n > MaxCapacity || places+n > MaxCapacity {
				return fmt.Errorf("layout: more than %d seats", MaxCapacity)
			}
			places += r.count()
		}
	}
	if places == 0 {
		return fmt.Errorf("layout: sections without seats")
	}
	seen := make(map[string]bool)
	for _, s := range l.Seats() {
		if !bands[s.Band] {
			return fmt.Errorf("layout: seat %s: unknown band %q", s.ID, s.Band)
		}
		if seen[s.ID] {
			return fmt.Errorf("layout: seat %s appears twice", s.ID)
		}
		seen[s.ID] = true
	}
	return nil
}

// Seated reports whether the layout sells numbered seats.
func (l *Layout) Seated() bool { return l.GeneralAdmission == nil }

// Capacity is the number of tickets the layout can sell.
func (l *Layout) Capacity() int {
	if l.GeneralAdmission != nil {
		return l.GeneralAdmission.Capacity
	}
	n := 0
	for _, sec := range l.Sections {
		for _, r := range sec.Rows {
			n += r.count()
		}
	}
	return n
}

func (r Row) count() int {
	if len(r.Numbers) > 0 {
		return len(r.Numbers)
	}
	return r.To - r.From + 1
}

// Seats expands the layout to its seats in layout order.
func (l *Layout) Seats() []Seat {
	seats := make([]Seat, 0, l.Capacity())
	for _, sec := range l.Sections {
		for rowNo, r := range sec.Rows {
			band := r.Band
			if band == "" {
				band = sec.Band
			}
			add := func(n int) {
				seats = append(seats, Seat{ID: SeatID(sec.Code, r.Label, n), Pos: len(seats),
					Section: sec.Code, Row: r.Label, RowNo: rowNo, Number: n, Band: band})
			}
			if len(r.Numbers) > 0 {
				for _, n := range r.Numbers {
					add(n)
				}
				continue
			}
			for n := r.From; n <= r.To; n++ {
				add(n)
			}
		}
	}
	return seats
}
