package crowd

import (
	"encoding/json"
	"slices"
	"testing"
)

// twoRows is section A: rows 1 and 2 of four seats, at bits 0-3 and 4-7.
func twoRows(tb testing.TB) Layout {
	tb.Helper()
	var l Layout
	if err := json.Unmarshal([]byte(`{"sections":[{"code":"A","rows":[{"label":"1","pos":0,"numbers":[1,2,3,4]},{"label":"2","pos":4,"numbers":[1,2,3,4]}]}]}`), &l); err != nil {
		tb.Fatal(err)
	}
	return l
}

func TestPickFree(t *testing.T) {
	l := twoRows(t)
	for _, tc := range []struct {
		name string
		bits byte
		want []string
	}{
		{"a run of three in row 2", 0b10010111, []string{"A-2-2", "A-2-3", "A-2-4"}},
		{"no run: scattered", 0b10010010, []string{"A-1-1", "A-1-4", "A-2-3"}},
		{"one left", 0b00000001, []string{"A-2-4"}},
		{"none", 0, nil},
	} {
		if got := PickFree(l, Bitmap{tc.bits}, 3); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v; want %v", tc.name, got, tc.want)
		}
	}
}

func TestPickFront(t *testing.T) {
	l := twoRows(t)
	for _, tc := range []struct {
		name  string
		bits  byte
		count int
		want  [][]string // any of these
	}{
		{"a whole row free", 0b11110000, 4, [][]string{{"A-1-1", "A-1-2", "A-1-3", "A-1-4"}}},
		{"both rows full", 0b11111111, 4, [][]string{{"A-1-1", "A-1-2", "A-1-3", "A-1-4"}, {"A-2-1", "A-2-2", "A-2-3", "A-2-4"}}},
		{"one pair free", 0b00000110, 2, [][]string{{"A-2-2", "A-2-3"}, nil}}, // 20 random tries may miss it
		{"no run of three", 0b10011001, 3, [][]string{nil}},
		{"more than a row holds", 0b11111111, 5, [][]string{nil}},
		{"the map is short", 0, 1, [][]string{nil}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range 50 {
				got := PickFront(l, Bitmap{tc.bits}, tc.count)
				if !slices.ContainsFunc(tc.want, func(w []string) bool { return slices.Equal(got, w) }) {
					t.Fatalf("PickFront(%08b, %d) = %v; want one of %v", tc.bits, tc.count, got, tc.want)
				}
			}
		})
	}
	if got := PickFront(Layout{}, Bitmap{0xff}, 1); got != nil {
		t.Errorf("PickFront(no sections) = %v; want nil", got)
	}
}

func TestBitmapFree(t *testing.T) {
	b := Bitmap{0b10000001, 0b01000000}
	for p, want := range map[int]bool{0: true, 1: false, 7: true, 8: false, 9: true, 15: false, 16: false, 99: false} {
		if got := b.Free(p); got != want {
			t.Errorf("Free(%d) = %v; want %v", p, got, want)
		}
	}
	if got := decodeBitmap("gQ=="); !slices.Equal(got, Bitmap{0x81}) {
		t.Errorf("decodeBitmap(gQ==) = %v", got)
	}
	if got := decodeBitmap(nil); len(got) != 0 {
		t.Errorf("decodeBitmap(nil) = %v; want empty", got)
	}
}
