package seed

import (
	"testing"
	"time"
)

func TestLayouts(t *testing.T) {
	tests := []struct {
		name     string
		capacity int
		seated   bool
		bands    int
	}{
		{"stadium", 40000, true, 4},
		{"cinema", 250, true, 3},
		{"amphitheatre", 2000, false, 1},
	}
	for _, tc := range tests {
		l, err := Layout(tc.name)
		if err != nil {
			t.Fatalf("Layout(%q): %v", tc.name, err)
		}
		if l.Capacity() != tc.capacity || l.Seated() != tc.seated || len(l.Bands) != tc.bands {
			t.Errorf("Layout(%q) = capacity %d seated %v bands %d; want %d %v %d",
				tc.name, l.Capacity(), l.Seated(), len(l.Bands), tc.capacity, tc.seated, tc.bands)
		}
		if tc.seated && len(l.Seats()) != tc.capacity {
			t.Errorf("Layout(%q) expands to %d seats", tc.name, len(l.Seats()))
		}
	}
}

func TestDemoOnsaleIsNextNoon(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 30, 0, 0, IST)
	specs := Demo(now)
	got := specs[0].OnsaleAt
	if want := time.Date(2026, 11, 30, 12, 0, 0, 0, IST); !got.Equal(want) {
		t.Fatalf("OnsaleAt = %v; want %v", got, want)
	}
	for _, s := range specs {
		if !s.StartsAt.After(s.OnsaleAt) {
			t.Errorf("%s starts %v before onsale %v", s.Name, s.StartsAt, s.OnsaleAt)
		}
	}
}
