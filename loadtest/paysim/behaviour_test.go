package paysim_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/onsale/onsale/loadtest/paysim"
)

func TestBehaviourJSON(t *testing.T) {
	b := paysim.DefaultBehaviour()
	b.FailRate, b.ReorderWindow = 0.1, 1500*time.Millisecond
	b.Outages = []paysim.Window{{Start: time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC), End: time.Date(2030, 1, 1, 12, 5, 0, 0, time.UTC)}}
	j, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(j), `"reorder_window":"1.5s"`) || !strings.HasPrefix(string(j), `{"upi_delay_min":"1s",`) {
		t.Errorf("Marshal = %s", j)
	}
	var back paysim.Behaviour
	if err := json.Unmarshal(j, &back); err != nil || !reflect.DeepEqual(back, b) {
		t.Errorf("round trip = %+v, %v; want %+v", back, err, b)
	}
	// Decoding over a Behaviour changes only what the JSON names.
	if err := json.Unmarshal([]byte(`{"duplicate_rate":0.5,"outage":null}`), &back); err != nil {
		t.Fatal(err)
	}
	want := b
	want.DuplicateRate = 0.5
	if !reflect.DeepEqual(back, want) {
		t.Errorf("partial update = %+v; want %+v", back, want)
	}
	if j, _ := json.Marshal(paysim.Behaviour{}); !strings.Contains(string(j), `"outage":[]`) {
		t.Errorf("zero Behaviour = %s; want an empty outage list", j)
	}
}
