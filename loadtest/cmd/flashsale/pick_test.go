package main

import (
	"encoding/json"
	"slices"
	"testing"
)

func TestPickFree(t *testing.T) {
	var l layout
	json.Unmarshal([]byte(`{"sections":[{"code":"A","rows":[{"label":"1","pos":0,"numbers":[1,2,3,4]},{"label":"2","pos":4,"numbers":[1,2,3,4]}]}]}`), &l)
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
		if got := pickFree(l, []byte{tc.bits}, 3); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v; want %v", tc.name, got, tc.want)
		}
	}
}
