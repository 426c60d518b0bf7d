package http

import (
	"reflect"
	"testing"

	"github.com/onsale/onsale/core"
	"github.com/onsale/onsale/core/layout"
)

// plainNames lets exactNames be skipped only for bodies whose member names
// cannot match a field in another case; exactNames then catches the rest.
func TestPlainNames(t *testing.T) {
	for raw, want := range map[string]bool{
		`{"seats":["AUD-A-1","AUD-A-2"]}`:              true, // capitals in values only
		`{"best_available":{"band":"GOLD","count":2}}`: true,
		`{"a":"B:C", "d" : "E"}`:                       true,
		`["A","B"]`:                                    true,
		`{"Seats":["AUD-A-1"]}`:                        false,
		`{"best_available":{"Band":"GOLD","count":2}}`: false,
		`{"a" : "x", "Q" :1}`:                          false,
		`{"se\u0041ts":[]}`:                            false, // an escape in a name
		`{"ſeats":[]}`:                                 false, // folds to "seats" in encoding/json
	} {
		if got := plainNames([]byte(raw)); got != want {
			t.Errorf("plainNames(%s) = %v; want %v", raw, got, want)
		}
	}
	type inner struct {
		Band string `json:"band"`
	}
	type outer struct {
		inner
		Seats []string `json:"seats"`
		Best  *inner   `json:"best"`
	}
	for raw, ok := range map[string]bool{
		`{"band":"x","seats":["A"]}`:                true, // promoted from the embedded struct
		`{"best":{"band":"x"}}`:                     true,
		`{"Band":"x"}`:                              false,
		`{"best":{"BAND":"x"}}`:                     false,
		`{"seats":[],"other":1}`:                    true,  // unknown in any case: the decoder's to refuse
		`{"best":{"BAND":"x"},"best":{"band":"y"}}`: false, // a name given twice: each is looked at
	} {
		if err := exactNames([]byte(raw), reflect.TypeOf(outer{})); (err == nil) != ok {
			t.Errorf("exactNames(%s) = %v; want ok=%v", raw, err, ok)
		}
	}
}

// Every body the API decodes names its members in lower case, digits and
// underscores: what plainNames assumes when it lets a body skip
// exactNames. A field named otherwise would let its case-folded spelling
// through unseen.
func TestBodyNamesArePlain(t *testing.T) {
	for _, v := range []any{holdBody{}, core.BestAvailable{}, payBody{}, scanBody{}, syncBody{}, cancelBody{}, signInBody{},
		core.NewOperator{}, core.OperatorPatch{}, core.ShowRequest{}, core.ShowPatch{}, layout.Layout{}} {
		var walk func(reflect.Type)
		walk = func(typ reflect.Type) {
			for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Array {
				typ = typ.Elem()
			}
			if typ.Kind() != reflect.Struct {
				return
			}
			for name, ft := range fieldsOf(typ) {
				if !plainNames([]byte(`{"` + name + `":0}`)) {
					t.Errorf("%s: member %q is not lower case, digits and underscores", typ, name)
				}
				walk(ft)
			}
		}
		walk(reflect.TypeOf(v))
	}
}
