package crowd

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// Layout is an event's seat layout as the gateway serves it: sections of
// rows, each row's seats at consecutive bit positions of the seat map from
// Pos on.
type Layout struct {
	Sections []Section `json:"sections"`
}

// Section is one block of the venue.
type Section struct {
	Code string `json:"code"`
	Rows []Row  `json:"rows"`
}

// Row is one row: its seat numbers, the first at bit Pos of the seat map.
type Row struct {
	Label   string `json:"label"`
	Pos     int    `json:"pos"`
	Numbers []int  `json:"numbers"`
}

// seatID is the seat's name in the hold API.
func seatID(sec Section, row Row, k int) string {
	return fmt.Sprintf("%s-%s-%d", sec.Code, row.Label, row.Numbers[k])
}

// Bitmap is the seat map's availability: bit p (most significant first) set
// when the seat at position p is free.
type Bitmap []byte

// decodeBitmap reads the seat map's base64 "available" field (empty when it
// is not one).
func decodeBitmap(v any) Bitmap {
	raw, _ := base64.StdEncoding.DecodeString(fmt.Sprint(v))
	return raw
}

// Free says whether the seat at position p is free; positions past the map
// are not.
func (b Bitmap) Free(p int) bool { return p/8 < len(b) && b[p/8]&(0x80>>(p%8)) != 0 }

// PickFree finds count adjacent free seats in one row, starting from a
// random section; failing that, up to count free seats wherever they are;
// nil when no seat is free.
func PickFree(l Layout, free Bitmap, count int) []string {
	var scattered []string
	n := len(l.Sections)
	off := rand.IntN(max(1, n))
	for i := range n {
		sec := l.Sections[(off+i)%n]
		for _, row := range sec.Rows {
			run := 0
			for k := range row.Numbers {
				if !free.Free(row.Pos + k) {
					run = 0
					continue
				}
				run++
				if len(scattered) < count {
					scattered = append(scattered, seatID(sec, row, k))
				}
				if run == count {
					return runOf(sec, row, k-count+1, count)
				}
			}
		}
	}
	if len(scattered) == 0 {
		return nil
	}
	return scattered
}

// PickFront chooses count adjacent free seats in one of the front four rows
// of a random section, as a fan tapping seats would: up to 20 random tries,
// then nil.
func PickFront(l Layout, free Bitmap, count int) []string {
	secs := l.Sections
	if len(secs) == 0 {
		return nil
	}
	for try := 0; try < 20; try++ {
		sec := secs[rand.IntN(len(secs))]
		row := sec.Rows[rand.IntN(min(4, len(sec.Rows)))] // the front rows everyone wants
		if len(row.Numbers) < count {
			continue
		}
		start := rand.IntN(len(row.Numbers) - count + 1)
		if allFree(free, row.Pos+start, count) {
			return runOf(sec, row, start, count)
		}
	}
	return nil
}

// allFree says whether the count seats from position p on are free.
func allFree(free Bitmap, p, count int) bool {
	for k := range count {
		if !free.Free(p + k) {
			return false
		}
	}
	return true
}

// runOf names the count seats of row from its k-th on.
func runOf(sec Section, row Row, k, count int) []string {
	out := make([]string, 0, count)
	for j := k; j < k+count; j++ {
		out = append(out, seatID(sec, row, j))
	}
	return out
}

// layoutCache is the event's layout, immutable: fetched and parsed once for
// the whole crowd (each fan still asks for it, as a browser would, but a
// browser parses only its own copy).
type layoutCache struct {
	once   sync.Once
	layout Layout
}

// get fetches the layout from target the first time (an empty layout if
// that fails).
func (c *layoutCache) get(target string) Layout {
	c.once.Do(func() {
		code, body, err := fasthttp.GetTimeout(nil, target, 30*time.Second)
		if err == nil && code == 200 {
			json.Unmarshal(body, &c.layout)
		}
	})
	return c.layout
}
