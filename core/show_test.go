package core_test

import (
	"testing"
	"time"

	"github.com/onsale/onsale/core"
)

var mumbai = time.FixedZone("IST", 5*3600+1800)

func TestShowTransitions(t *testing.T) {
	for _, tc := range []struct {
		from, to string
		ok       bool
		action   string
	}{
		{core.ShowDraft, core.ShowPublished, true, "publish"},
		{core.ShowPublished, core.ShowClosed, true, "close"},
		{core.ShowClosed, core.ShowPublished, true, "publish"},
		{core.ShowPublished, core.ShowCancelled, true, "cancel"},
		{core.ShowDraft, core.ShowClosed, false, ""},
		{core.ShowPublished, core.ShowPublished, false, ""},
		{core.ShowCancelled, core.ShowPublished, false, ""},
		{core.ShowCancelled, core.ShowDraft, false, ""},
		{core.ShowPublished, core.ShowDraft, false, ""},
	} {
		err := core.ShowTransition(tc.from, tc.to)
		if (err == nil) != tc.ok || core.ActionOf(tc.from, tc.to) != tc.action {
			t.Errorf("ShowTransition(%s, %s) = %v, action %q; want ok=%v, %q", tc.from, tc.to, err, core.ActionOf(tc.from, tc.to), tc.ok, tc.action)
		}
		if err != nil && core.ErrorCode(err) != core.EConflict {
			t.Errorf("ShowTransition(%s, %s) = %v; want conflict", tc.from, tc.to, err)
		}
	}
}

func TestShowPlan(t *testing.T) {
	now := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	bands := []core.PriceBand{{Code: "A", Name: "A", PricePaise: 100}, {Code: "B", Name: "B", PricePaise: 200}}
	good := core.ShowRequest{Title: " Dune ", Kind: core.KindMovie, LayoutID: 1, Starts: []string{"2026-12-20T19:30", "2026-12-21T10:00:00+05:30"},
		OnsaleAt: "2026-12-10 09:00", Prices: map[string]int64{"B": 250}}
	p, err := good.Plan(mumbai, bands, now)
	if err != nil {
		t.Fatal(err)
	}
	if p.Title != "Dune" || p.MaxPerAccount != 6 || p.HoldSeconds != 480 || len(p.Starts) != 2 ||
		!p.Starts[0].Equal(time.Date(2026, 12, 20, 14, 0, 0, 0, time.UTC)) || p.Bands[0].PricePaise != 100 || p.Bands[1].PricePaise != 250 {
		t.Errorf("Plan = %+v", p)
	}
	if bands[1].PricePaise != 200 {
		t.Error("Plan changed the layout's bands")
	}
	for _, tc := range []struct {
		name string
		edit func(*core.ShowRequest)
	}{
		{"no title", func(r *core.ShowRequest) { r.Title = "  " }},
		{"long title", func(r *core.ShowRequest) { r.Title = string(make([]rune, 201)) }},
		{"kind", func(r *core.ShowRequest) { r.Kind = "play" }},
		{"no starts", func(r *core.ShowRequest) { r.Starts = nil }},
		{"past sale", func(r *core.ShowRequest) { r.OnsaleAt = "2026-12-07T15:00" }}, // 09:30 UTC: before now
		{"sale within the freeze", func(r *core.ShowRequest) { r.OnsaleAt = "2026-12-07T15:30:30" }},
		{"start before the sale", func(r *core.ShowRequest) { r.Starts = []string{"2026-12-09T19:30"} }},
		{"start twice", func(r *core.ShowRequest) { r.Starts = []string{"2026-12-20T19:30", "2026-12-20T14:00:00Z"} }},
		{"bad time", func(r *core.ShowRequest) { r.Starts = []string{"20/12/2026"} }},
		{"unknown band", func(r *core.ShowRequest) { r.Prices = map[string]int64{"C": 1} }},
		{"negative price", func(r *core.ShowRequest) { r.Prices = map[string]int64{"A": -1} }},
		{"huge price", func(r *core.ShowRequest) { r.Prices = map[string]int64{"A": core.MaxPricePaise + 1} }},
		{"limit", func(r *core.ShowRequest) { r.MaxPerAccount = 65 }},
		{"hold", func(r *core.ShowRequest) { r.HoldSeconds = 30 }},
	} {
		r := good
		r.Starts = append([]string(nil), good.Starts...)
		tc.edit(&r)
		if _, err := r.Plan(mumbai, bands, now); core.ErrorCode(err) != core.EInvalid {
			t.Errorf("%s: Plan = %v; want invalid_request", tc.name, err)
		}
	}
}

func TestShowEdit(t *testing.T) {
	now := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	e := core.Event{Name: "Dune", Status: core.ShowPublished, OnsaleAt: now.Add(2 * time.Hour), StartsAt: now.Add(48 * time.Hour),
		MaxPerAccount: 6, HoldSeconds: 480, Bands: []core.PriceBand{{Code: "A", PricePaise: 100}}}
	if err := e.Editable(now); err != nil {
		t.Errorf("Editable 2 h before the sale = %v", err)
	}
	for _, tc := range []struct {
		name   string
		status string
		at     time.Time
	}{
		{"within the freeze", core.ShowPublished, e.OnsaleAt.Add(-core.EditFreeze)},
		{"after the sale opened", core.ShowPublished, e.OnsaleAt.Add(time.Minute)},
		{"closed", core.ShowClosed, now},
		{"cancelled", core.ShowCancelled, now},
	} {
		c := e
		c.Status = tc.status
		if err := c.Editable(tc.at); core.ErrorCode(err) != core.EShowLocked {
			t.Errorf("%s: Editable = %v; want show_locked", tc.name, err)
		}
	}
	title, start, sale := "Dune: Part Two", "2026-12-09T18:00", "2026-12-09T19:00"
	got, err := core.ShowPatch{Title: &title, StartsAt: &start, Prices: map[string]int64{"A": 0}}.Apply(e, mumbai, now)
	if err != nil || got.Name != title || !got.StartsAt.Equal(time.Date(2026, 12, 9, 12, 30, 0, 0, time.UTC)) || got.Bands[0].PricePaise != 0 || e.Bands[0].PricePaise != 100 {
		t.Errorf("Apply = %+v, %v", got, err)
	}
	if _, err := (core.ShowPatch{OnsaleAt: &sale, StartsAt: &start}).Apply(e, mumbai, now); core.ErrorCode(err) != core.EInvalid {
		t.Errorf("a start before the sale = %v; want invalid_request", err)
	}
	if _, err := (core.ShowPatch{}).Apply(e, mumbai, now); core.ErrorCode(err) != core.EInvalid {
		t.Errorf("an empty patch = %v; want invalid_request", err)
	}
}

func TestCursor(t *testing.T) {
	c := core.Cursor{StartsAt: time.Date(2026, 12, 20, 14, 0, 0, 123000, time.UTC), ID: 42}
	got, err := core.ParseCursor(c.Encode())
	if err != nil || !got.StartsAt.Equal(c.StartsAt) || got.ID != 42 {
		t.Errorf("ParseCursor(Encode(%v)) = %v, %v", c, got, err)
	}
	for _, bad := range []string{"x", "!!", "MTIz", "MTIzLjA", "YWJjLjE"} {
		if _, err := core.ParseCursor(bad); core.ErrorCode(err) != core.EInvalid {
			t.Errorf("ParseCursor(%q) = %v; want invalid_request", bad, err)
		}
	}
}

func TestOperatorRules(t *testing.T) {
	for _, tc := range []struct {
		role, perm string
		ok         bool
	}{
		{core.RoleAdmin, core.PermOperators, true},
		{core.RoleBoxOffice, core.PermOperators, false},
		{core.RoleBoxOffice, core.PermCancel, true},
		{core.RoleBoxOffice, core.PermDials, true},
		{core.RoleSaleDesk, core.PermDials, true},
		{core.RoleSaleDesk, core.PermEditShows, false},
		{core.RoleSaleDesk, core.PermCancel, false},
		{core.RoleSaleDesk, core.PermSales, false},
		{"root", core.PermReadShows, false},
	} {
		o := core.Operator{Name: "x", Role: tc.role}
		if err := o.May(tc.perm); (err == nil) != tc.ok {
			t.Errorf("%s May(%s) = %v; want ok=%v", tc.role, tc.perm, err, tc.ok)
		}
	}
	if err := (&core.Operator{Role: core.RoleAdmin, Disabled: true}).May(core.PermReadShows); err == nil {
		t.Error("a disabled admin may read shows")
	}
	for _, n := range []core.NewOperator{{Name: "Asha", Role: "admin", Password: "long enough pw"}, {Name: "asha", Role: "boss", Password: "long enough pw"},
		{Name: "asha", Role: "admin", Password: "short"}, {Name: "-asha", Role: "admin", Password: "long enough pw"}} {
		if err := n.Validate(); core.ErrorCode(err) != core.EInvalid {
			t.Errorf("Validate(%+v) = %v; want invalid_request", n, err)
		}
	}
}
