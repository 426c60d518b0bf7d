// Package layout reads seat layouts: a venue's sections, rows, seat numbers
// and price bands as a JSON document, expanded to one seat per place.
package layout

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
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
// A document that is not JSON of the layout's shape fails with an error
// naming the line and column; one that is fails Validate's *Problems.
func Parse(r io.Reader) (*Layout, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("parse layout: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var l Layout
	if err := dec.Decode(&l); err != nil {
		return nil, &Problems{List: []Problem{{Path: at(b, err, dec.InputOffset()), Message: jsonMessage(err)}}}
	}
	if dec.More() {
		return nil, &Problems{List: []Problem{{Path: at(b, nil, dec.InputOffset()), Message: "trailing data after the layout object"}}}
	}
	if err := l.Validate(); err != nil {
		return nil, err
	}
	return &l, nil
}

// at names where a decoding error is in b: "line L, column C" (the
// error's offset, or the decoder's).
func at(b []byte, err error, off int64) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
	}
	off = max(0, min(off, int64(len(b))))
	line := 1 + bytes.Count(b[:off], []byte("\n"))
	col := off - int64(bytes.LastIndexByte(b[:off], '\n'))
	return fmt.Sprintf("line %d, column %d", line, col)
}

func jsonMessage(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("%s must be %s, not %s", te.Field, te.Type, te.Value)
	}
	return strings.TrimPrefix(err.Error(), "json: ")
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

// Problem is one thing wrong in a layout: where (a JSON path such as
// sections[2].rows[5], with the section code and row label it names) and
// what.
type Problem struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

// maxProblems bounds the problems reported: a layout with thousands of bad
// seats is reported by its first ones.
const maxProblems = 50

// Problems is a layout's list of problems (at most maxProblems; More says
// how many more there were).
type Problems struct {
	List []Problem
	More int
}

func (p *Problems) Error() string {
	var b strings.Builder
	b.WriteString("layout:")
	for i, pr := range p.List {
		if i > 0 {
			b.WriteString(";")
		}
		fmt.Fprintf(&b, " %s: %s", pr.Path, pr.Message)
	}
	if p.More > 0 {
		fmt.Fprintf(&b, "; and %d more", p.More)
	}
	return b.String()
}

func (p *Problems) add(path, format string, args ...any) {
	if len(p.List) >= maxProblems {
		p.More++
		return
	}
	p.List = append(p.List, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

// Validate checks that the venue is named, bands are defined once with a
// non-negative price, every section has a code, every row a label and
// seats, every seat a known band and a unique id, a layout is either
// seated or GA, and it has 1 to MaxCapacity places. It returns *Problems
// naming every section, row and seat at fault (up to 50).
func (l *Layout) Validate() error {
	p := &Problems{}
	if l.Venue.Name == "" || l.Venue.City == "" {
		p.add("venue", "name and city are required")
	}
	if l.Venue.Timezone != "" {
		if _, err := time.LoadLocation(l.Venue.Timezone); err != nil {
			p.add("venue.timezone", "%q is not an IANA time zone (e.g. Asia/Kolkata)", l.Venue.Timezone)
		}
	}
	bands := make(map[string]bool)
	for i, b := range l.Bands {
		path := fmt.Sprintf("bands[%d]", i)
		switch {
		case b.Code == "":
			p.add(path, "a band needs a code")
		case bands[b.Code]:
			p.add(path, "band %s is defined twice", b.Code)
		case b.PricePaise < 0:
			p.add(path, "band %s has a negative price", b.Code)
		}
		bands[b.Code] = true
	}
	switch {
	case l.GeneralAdmission != nil && len(l.Sections) > 0:
		p.add("document", "a layout has sections or general_admission, not both")
	case l.GeneralAdmission != nil:
		ga := l.GeneralAdmission
		if ga.Capacity <= 0 || ga.Capacity > MaxCapacity {
			p.add("general_admission.capacity", "is 1 to %d", MaxCapacity)
		}
		if !bands[ga.Band] {
			p.add("general_admission.band", "no band %q in bands", ga.Band)
		}
	case len(l.Sections) == 0:
		p.add("document", "no sections and no general_admission")
	default:
		l.validateSeats(p, bands)
	}
	if len(p.List) > 0 {
		return p
	}
	return nil
}

// validateSeats checks sections, rows and seats (a seated layout).
func (l *Layout) validateSeats(p *Problems, bands map[string]bool) {
	places := 0
	codes := make(map[string]int)
	for si, sec := range l.Sections {
		spath := fmt.Sprintf("sections[%d]", si)
		if sec.Code == "" {
			p.add(spath, "a section needs a code")
			continue
		}
		spath += " (section " + sec.Code + ")"
		if prev, dup := codes[sec.Code]; dup {
			p.add(spath, "section code %s is also sections[%d]'s", sec.Code, prev)
		}
		codes[sec.Code] = si
		if sec.Band != "" && !bands[sec.Band] {
			p.add(spath, "no band %q in bands", sec.Band)
		}
		if len(sec.Rows) == 0 {
			p.add(spath, "a section needs rows")
		}
		for ri, r := range sec.Rows {
			rpath := fmt.Sprintf("%s.rows[%d]", spath, ri)
			if r.Label != "" {
				rpath += " (row " + r.Label + ")"
			}
			switch {
			case r.Label == "":
				p.add(rpath, "a row needs a label")
				continue
			case len(r.Numbers) > 0 && (r.From != 0 || r.To != 0):
				p.add(rpath, "give numbers or from/to, not both")
				continue
			case len(r.Numbers) == 0 && (r.From <= 0 || r.To < r.From):
				p.add(rpath, "seats from %d to %d: give from ≥ 1 and to ≥ from, or numbers", r.From, r.To)
				continue
			}
			band := r.Band
			if band == "" {
				band = sec.Band
			}
			if !bands[band] {
				if r.Band != "" {
					p.add(rpath, "no band %q in bands", r.Band)
				} else if sec.Band == "" {
					p.add(rpath, "no band: give the row or its section one")
				}
			}
			// each term and the sum stay within MaxCapacity, so nothing overflows
			if n := r.count(); n > MaxCapacity || places+n > MaxCapacity {
				p.add(rpath, "the layout passes %d seats", MaxCapacity)
				return
			}
			places += r.count()
			seen := make(map[int]bool, len(r.Numbers))
			for ni, n := range r.Numbers {
				switch {
				case n <= 0:
					p.add(fmt.Sprintf("%s.numbers[%d]", rpath, ni), "seat number %d: seat numbers are positive", n)
				case seen[n]:
					p.add(fmt.Sprintf("%s.numbers[%d]", rpath, ni), "seat %s appears twice", SeatID(sec.Code, r.Label, n))
				}
				seen[n] = true
			}
		}
	}
	if len(p.List) > 0 {
		return
	}
	if places == 0 {
		p.add("sections", "no seats")
		return
	}
	// Seat ids join section, row and number with '-': two rows can still
	// name one id ("A-1" row "2" and "A" row "1-2").
	seen := make(map[string]bool, places)
	for _, s := range l.Seats() {
		if seen[s.ID] {
			p.add("section "+s.Section+", row "+s.Row, "seat %s appears twice", s.ID)
		}
		seen[s.ID] = true
	}
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
