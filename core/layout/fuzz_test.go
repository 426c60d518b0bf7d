package layout

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// FuzzParse feeds the layout reader any document. A refusal is an error
// and nothing else (no panic: a row range near the top of int once
// overflowed Capacity and panicked in Seats; see MaxCapacity). An
// accepted layout keeps every promise Validate makes: at most MaxCapacity
// places, Capacity equal to the seats Seats expands, each seat at its own
// position, unique ids spelled by SeatID, known bands; and written back as
// JSON it parses to the same seats.
func FuzzParse(f *testing.F) {
	const venue = `"venue":{"name":"Hall","city":"Pune","timezone":"Asia/Kolkata"}`
	const band = `"bands":[{"code":"A","name":"A","price_paise":100},{"code":"B","name":"B","price_paise":0}]`
	for _, doc := range []string{
		`{` + venue + `,` + band + `,"sections":[{"code":"S","band":"A","rows":[{"label":"1","from":1,"to":10},{"label":"2","numbers":[1,3,5],"band":"B"}]}]}`,
		`{` + venue + `,` + band + `,"general_admission":{"capacity":50,"band":"A"}}`,
		`{` + venue + `,` + band + `,"sections":[{"code":"S","band":"A","rows":[{"label":"1","from":1,"to":9223372036854775807},{"label":"2","from":1,"to":9223372036854775807}]}]}`,
		`{` + venue + `,` + band + `,"sections":[{"code":"S","band":"A","rows":[{"label":"1","from":1,"to":2000000000}]}]}`,
		`{` + venue + `,` + band + `,"sections":[{"code":"A","band":"A","rows":[{"label":"1-2","from":3,"to":3}]},{"code":"A-1","band":"A","rows":[{"label":"2","from":3,"to":3}]}]}`,
		`{` + venue + `,` + band + `,"general_admission":{"capacity":9223372036854775807,"band":"A"}}`,
		`{` + venue + `,"bands":[{"code":"A","price_paise":1},{"code":"A","price_paise":2}],"general_admission":{"capacity":5,"band":"A"}}`,
		`{` + venue + `,` + band + `,"sections":[{"code":"S","band":"Z","rows":[{"label":"1","numbers":[-1,0]}]}]}`,
		`{}`, `null`, `[]`, `{"venue":{"name":"\ud800","city":"x"}}`,
	} {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		l, err := ParseBytes(doc)
		if err != nil {
			if l != nil {
				t.Fatalf("ParseBytes = %v with error %v", l, err)
			}
			return
		}
		if err := l.Validate(); err != nil {
			t.Fatalf("a parsed layout does not validate: %v", err)
		}
		if c := l.Capacity(); c <= 0 || c > MaxCapacity {
			t.Fatalf("Capacity = %d; want 1 to %d", c, MaxCapacity)
		}
		seats := l.Seats()
		if l.Seated() {
			checkSeats(t, l, seats)
		} else if len(seats) != 0 {
			t.Fatalf("a GA layout expands to %d seats", len(seats))
		}
		b, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseBytes(b)
		if err != nil {
			t.Fatalf("ParseBytes(%s) of a written layout: %v", b, err)
		}
		if back.Capacity() != l.Capacity() || !reflect.DeepEqual(back.Seats(), seats) {
			t.Fatalf("layout %s did not round-trip", b)
		}
	})
}

func checkSeats(t *testing.T, l *Layout, seats []Seat) {
	t.Helper()
	if len(seats) != l.Capacity() {
		t.Fatalf("Seats = %d seats; Capacity = %d", len(seats), l.Capacity())
	}
	bands := map[string]bool{}
	for _, b := range l.Bands {
		bands[b.Code] = true
	}
	ids := map[string]bool{}
	for i, s := range seats {
		switch {
		case s.Pos != i:
			t.Fatalf("seat %d has position %d", i, s.Pos)
		case ids[s.ID]:
			t.Fatalf("seat id %q twice", s.ID)
		case s.ID != SeatID(s.Section, s.Row, s.Number) || !strings.HasPrefix(s.ID, s.Section+"-"):
			t.Fatalf("seat %+v: id is not SeatID's", s)
		case !bands[s.Band]:
			t.Fatalf("seat %s in unknown band %q", s.ID, s.Band)
		}
		ids[s.ID] = true
	}
}
