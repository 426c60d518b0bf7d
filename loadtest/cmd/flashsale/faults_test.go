package main

import (
	"strings"
	"testing"
	"time"

	"github.com/onsale/onsale/loadtest/check"
	"github.com/onsale/onsale/loadtest/faults"
	"github.com/onsale/onsale/loadtest/report"
)

// A fault's effect as the summary and the report say it.
func TestFaultLines(t *testing.T) {
	onsale := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return onsale.Add(time.Duration(s) * time.Second) }
	x := faults.Effect{Event: faults.Event{Fault: faults.PGPrimary, Target: "pg1 (the primary)", At: at(5), Back: at(15), Rejoined: at(21), Detail: "kill -9 of pg1"},
		Errors: []faults.Errors{{Route: "hold", Class: "503", Seconds: 10, N: 3324}}, Stall: 3 * time.Second, StallFrom: at(6), Resumed: at(9),
		Effective: 600, Dial: 6000, Health: "lowered: core 503s 100%", Recovered: at(35)}
	rows := faultRows([]faults.Effect{x, {Event: faults.Event{Fault: faults.Core, Err: "no cores"}, Effective: -1}}, onsale)
	r := rows[0]
	if r.At != 5 || r.Back != "10.0 s" || r.Rejoined != "16.0 s" || r.Errors[0] != "hold 503: 10 s (3324)" || r.Failed {
		t.Errorf("row %+v", r)
	}
	if want := "stood still 3 s from t+6s while fans waited; resumed by itself at t+9s (no dial touched)"; r.Stall != want {
		t.Errorf("stall %q; want %q", r.Stall, want)
	}
	if want := "down to 600/min of the dial's 6000 (lowered: core 503s 100%); back at the dial at t+35s"; r.Effective != want {
		t.Errorf("effective %q; want %q", r.Effective, want)
	}
	if !rows[1].Failed || rows[1].Stall != "not injected" || !strings.Contains(rows[1].Detail, "no cores") || rows[1].Effective != "" {
		t.Errorf("a fault never injected: %+v", rows[1])
	}
	if m := faultMarkers([]faults.Effect{x, {Event: faults.Event{Fault: faults.Core}}}, onsale); len(m) != 1 || m[0].T != 5 || m[0].Label != "pg-primary" {
		t.Errorf("markers %+v; want pg-primary at 5 alone", m)
	}
}

// Answers by endpoint and class; the errors chart has the endpoints with
// errors, second by second, from the first reading on.
func TestAnswerTables(t *testing.T) {
	onsale := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return onsale.Add(time.Duration(s) * time.Second) }
	answers := []check.Answer{{Route: "auth code", Class: "503", At: at(-60), N: 9}, {Route: "hold", Class: "201", At: at(1), N: 5}, {Route: "hold", Class: "503", At: at(2), N: 3}, {Route: "hold", Class: "503", At: at(4), N: 1},
		{Route: "status", Class: "200", At: at(2), N: 50}, {Route: "status", Class: check.ClassConn, At: at(3), N: 7}}
	tab := answerTable(answers)
	if len(tab) != 3 || tab[1].Route != "hold" || len(tab[1].Classes) != 2 || tab[1].Classes[1] != (report.ClassCount{Class: "503", N: 4, Seconds: 2, Error: true}) {
		t.Errorf("answer table %+v", tab)
	}
	charts := errorChart(answers, onsale, -7)
	if len(charts) != 1 || len(charts[0].Lines) != 2 || charts[0].Lines[0].Name != "hold" || charts[0].Lines[1].Name != "status" {
		t.Fatalf("errors chart %+v; want hold and status (the sign-in before the first reading left out)", charts)
	}
	if p := charts[0].Lines[0].Points; len(p) != 4 || p[0].T != 1 || p[1].V != 3 || p[2].V != 0 || p[3].V != 1 {
		t.Errorf("hold's errors %+v; want 0, 3, 0, 1 from t+1", p)
	}
	if c := errorChart(answers[1:2], onsale, 0); c != nil {
		t.Errorf("no errors: chart %+v; want none", c)
	}
}
