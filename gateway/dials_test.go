package gateway

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// A PATCH body sets exactly the dials it names (nulls set nothing), knows
// which of them the frozen pre-queue fixes, and refuses unknown names (names
// are exact: "Paused" is none) and values of the wrong type.
func TestDialPatch(t *testing.T) {
	p, err := ParseDialPatch([]byte(`{"paused":true,"new_users_per_minute":6000,"closes_at":null,"queueing":"fifo"}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.Changed(), []string{"new_users_per_minute", "paused", "queueing"}; !slices.Equal(got, want) {
		t.Errorf("Changed() = %v; want %v (in DialList order, null left out)", got, want)
	}
	if !p.TouchesFrozen() {
		t.Error("a patch of queueing does not touch the frozen dials")
	}
	d := DefaultDials(time.Now(), time.Now().Add(time.Hour))
	closes := d.ClosesAt
	p.Apply(&d)
	if !d.Paused || d.NewUsersPerMinute != 6000 || d.Queueing != "fifo" || !d.ClosesAt.Equal(closes) {
		t.Errorf("applied = %+v", d)
	}
	if q, _ := ParseDialPatch([]byte(`{"paused":false}`)); q.TouchesFrozen() {
		t.Error("a patch of paused touches the frozen dials")
	}
	for _, bad := range []string{`{"nope":1}`, `{"Paused":true}`, `{"paused":"yes"}`, `{"onsale_at":5}`, `{`, `[]`, `{"version":3}`, `{"epoch":"x"}`} {
		if _, err := ParseDialPatch([]byte(bad)); err == nil {
			t.Errorf("ParseDialPatch(%s) = nil error", bad)
		}
	}
}

// DialList names every field of Dials once, under the field's JSON name:
// a dial added to the struct and not to the list would never be stored or
// patched, and a dial whose name is not its JSON tag would be patched
// under one name and shown under another. Only the store's own fields are
// not dials.
func TestDialListComplete(t *testing.T) {
	notDials := map[string]bool{"Version": true, "Epoch": true} // the store keeps them
	var d Dials
	v := reflect.ValueOf(&d).Elem()
	// Each field's address: what a dial's Field returns for it.
	fields := map[uintptr]reflect.StructField{}
	for i := range v.NumField() {
		fields[v.Field(i).Addr().Pointer()] = v.Type().Field(i)
	}
	listed := map[string]string{} // field name: dial name
	for _, dl := range DialList {
		f, ok := fields[reflect.ValueOf(dl.Field(&d)).Pointer()]
		if !ok {
			t.Errorf("dial %s points at no field of Dials", dl.Name)
			continue
		}
		if other, dup := listed[f.Name]; dup {
			t.Errorf("dials %s and %s are one field, %s", dl.Name, other, f.Name)
		}
		listed[f.Name] = dl.Name
		if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); dl.Name != tag {
			t.Errorf("dial %s reads and writes Dials.%s, whose JSON name is %q", dl.Name, f.Name, tag)
		}
		if notDials[f.Name] {
			t.Errorf("dial %s is Dials.%s, which the store keeps", dl.Name, f.Name)
		}
	}
	for _, f := range reflect.VisibleFields(v.Type()) {
		if _, ok := listed[f.Name]; !ok && !notDials[f.Name] {
			t.Errorf("Dials.%s is in no dial of DialList (nor one of the store's fields)", f.Name)
		}
	}
}
