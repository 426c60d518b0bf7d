package layout

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	const venue = `"venue":{"name":"Hall","city":"Pune"}`
	const band = `"bands":[{"code":"A","name":"A","price_paise":100}]`
	tests := []struct {
		name  string
		doc   string
		seats int // -1: want an error
	}{
		{"range row", `{` + venue + `,` + band + `,"sections":[{"code":"S","band":"A","rows":[{"label":"1","from":1,"to":10}]}]}`, 10},
		{"explicit numbers", `{` + venue + `,` + band + `,"sections":[{"code":"S","band":"A","rows":[{"label":"1","numbers":[1,2,5]}]}]}`, 3},
		{"GA", `{` + venue + `,` + band + `,"general_admission":{"capacity":50,"band":"A"}}`, 50},
		{"unknown band", `{` + venue + `,` + band + `,"sections":[{"code":"S","band":"B","rows":[{"label":"1","from":1,"to":2}]}]}`, -1},
		{"duplicate seat", `{` + venue + `,` + band + `,"sections":[{"code":"S","band":"A","rows":[{"label":"1","from":1,"to":2},{"label":"1","from":2,"to":3}]}]}`, -1},
		{"empty row", `{` + venue + `,` + band + `,"sections":[{"code":"S","band":"A","rows":[{"label":"1"}]}]}`, -1},
		{"reversed range", `{` + venue + `,` + band + `,"sections":[{"code":"S","band":"A","rows":[{"label":"1","from":5,"to":2}]}]}`, -1},
		{"both seated and GA", `{` + venue + `,` + band + `,"sections":[{"code":"S","band":"A","rows":[{"label":"1","from":1,"to":2}]}],"general_admission":{"capacity":5,"band":"A"}}`, -1},
		{"nothing to sell", `{` + venue + `,` + band + `}`, -1},
		{"negative price", `{` + venue + `,"bands":[{"code":"A","price_paise":-1}],"general_admission":{"capacity":5,"band":"A"}}`, -1},
		{"no venue", `{` + band + `,"general_admission":{"capacity":5,"band":"A"}}`, -1},
		{"unknown field", `{` + venue + `,` + band + `,"general_admission":{"capacity":5,"band":"A"},"colour":"red"}`, -1},
		{"not JSON", `sections:`, -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, err := Parse(strings.NewReader(tc.doc))
			if tc.seats < 0 {
				if err == nil {
					t.Fatalf("Parse(%s) accepted a bad layout", tc.name)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%s): %v", tc.name, err)
			}
			if l.Capacity() != tc.seats {
				t.Fatalf("Capacity = %d; want %d", l.Capacity(), tc.seats)
			}
		})
	}
}

func TestSeatsOrder(t *testing.T) {
	l := &Layout{Sections: []Section{{Code: "S", Band: "A", Rows: []Row{{Label: "B", From: 3, To: 4}, {Label: "A", Numbers: []int{9}}}}}}
	got := l.Seats()
	want := []Seat{{ID: "S-B-3", Pos: 0, Section: "S", Row: "B", RowNo: 0, Number: 3, Band: "A"},
		{ID: "S-B-4", Pos: 1, Section: "S", Row: "B", RowNo: 0, Number: 4, Band: "A"},
		{ID: "S-A-9", Pos: 2, Section: "S", Row: "A", RowNo: 1, Number: 9, Band: "A"}}
	if len(got) != len(want) {
		t.Fatalf("Seats = %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("seat %d = %+v; want %+v", i, got[i], want[i])
		}
	}
}
