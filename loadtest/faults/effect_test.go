package faults

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/onsale/onsale/loadtest/check"
	"github.com/onsale/onsale/loadtest/paysim"
)

// A sale second by second: places offered every second but 20 to 27 (a
// fault at 20), fans waiting and room to spare throughout; 503s on status
// and no connection on hold in 20-23; the effective rate halved at 21 and
// back at the dial at 30. A second fault at 40 closes the first's window.
func TestEffects(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	var o Observed
	serving := int64(0)
	for s := 0; s < 60; s++ {
		if s < 20 || s >= 28 {
			serving += 10
		}
		eff := 600.0
		if s >= 21 && s < 30 {
			eff = 300
		}
		o.Samples = append(o.Samples, check.Sample{At: at(float64(s) + 0.5), Serving: serving, Queued: 100, Active: 5, Cap: 50,
			Dial: 600, Effective: eff, Health: "degraded: hold p90 900 ms"})
	}
	o.Claims = []time.Time{at(10.2), at(19.9), at(28.7)}
	for s := 20; s < 24; s++ {
		o.Answers = append(o.Answers, check.Answer{Route: "status", Class: "503", At: at(float64(s)), N: 7},
			check.Answer{Route: "hold", Class: check.ClassConn, At: at(float64(s)), N: 1},
			check.Answer{Route: "hold", Class: "409", At: at(float64(s)), N: 3}) // an answer, not an error
	}
	o.Answers = append(o.Answers, check.Answer{Route: "status", Class: "503", At: at(45), N: 1}) // the next fault's
	o.End = at(60)
	events := []Event{{Fault: Core, At: at(20), Back: at(24)}, {Fault: Gateway, At: at(40), Back: at(41)}, {Fault: ProviderDown, Err: "x"}}
	fx := Effects(events, o)
	x := fx[0]
	if !x.Until.Equal(at(40)) {
		t.Errorf("window until %v; want the next fault's injection", x.Until)
	}
	if len(x.Errors) != 2 || x.Errors[0] != (Errors{"status", "503", 4, 28}) || x.Errors[1] != (Errors{"hold", "conn", 4, 4}) {
		t.Errorf("errors %+v; want status 503 4 s (28) and hold conn 4 s (4), and no 409", x.Errors)
	}
	// Samples at .5: the one at 20.5 has not moved; at 28.5 it moved.
	if x.Stall != 8*time.Second || !x.StallFrom.Equal(at(20)) || !x.Resumed.Equal(at(28.5)) {
		t.Errorf("stall %v from %v, resumed %v; want 8 s from 20, resumed at 28.5", x.Stall, x.StallFrom, x.Resumed)
	}
	if x.Touched || x.Effective != 300 || x.Dial != 600 || x.Health != "degraded: hold p90 900 ms" || !x.Recovered.Equal(at(30.5)) {
		t.Errorf("dials touched %v, effective %v of %d (%s), recovered %v; want untouched, 300 of 600, back at 30.5", x.Touched, x.Effective, x.Dial, x.Health, x.Recovered)
	}
	if y := fx[1]; y.Stall != 0 || len(y.Errors) != 1 || !y.Until.Equal(at(60)) {
		t.Errorf("second fault %+v; want no stall, one error class, until the sale's end", y)
	}
	if z := fx[2]; z.Effective != -1 || z.Errors != nil {
		t.Errorf("a fault never injected: %+v", z)
	}

	// Nobody waiting (or the room full) is no stall.
	for i := range o.Samples {
		o.Samples[i].Queued = 0
	}
	if x := Effects(events[:1], o)[0]; x.Stall != 0 {
		t.Errorf("stall %v with nobody waiting; want none", x.Stall)
	}
}

// The payment simulator's control: an outage window makes its API answer
// 503 until it ends; a payment approved during it has its webhook held
// (Held counts it), sent once the window is over.
func TestPaysim(t *testing.T) {
	got := make(chan struct{}, 10)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got <- struct{}{} }))
	defer hook.Close()
	sim, err := paysim.New(paysim.Config{APIKey: "k", WebhookSecret: "s", WebhookURL: hook.URL, Control: true,
		Behaviour: paysim.Behaviour{UPIDelayMin: time.Hour, UPIDelayMax: time.Hour}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim.Handler())
	defer srv.Close()
	defer sim.Close()
	p := Paysim{URL: srv.URL, Key: "k"}
	ctx := context.Background()
	if !p.Up(ctx) {
		t.Fatal("Up before the outage = false")
	}
	var pay struct{ ID string }
	req, _ := http.NewRequest("POST", srv.URL+"/v1/payments", strings.NewReader(`{"amount":100,"currency":"INR","reference":"booking-1","method":"upi"}`))
	req.Header.Set("Authorization", "Bearer k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("a UPI payment: %v %v", resp, err)
	}
	json.NewDecoder(resp.Body).Decode(&pay)
	resp.Body.Close()

	now := time.Now()
	if err := p.Outage(ctx, now.Add(-time.Second), now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := p.Outage(ctx, now.Add(2*time.Hour), now.Add(3*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if b := sim.Behaviour(); len(b.Outages) != 2 {
		t.Errorf("outages %+v; want both windows", b.Outages)
	}
	if p.Up(ctx) {
		t.Error("Up during the outage = true")
	}
	if _, err := sim.Settle(pay.ID, true); err != nil { // the payer approves during the outage
		t.Fatal(err)
	}
	if n, err := p.Held(ctx); err != nil || n != 1 {
		t.Errorf("Held = %d, %v; want the approval's webhook", n, err)
	}
	sim.SetBehaviour(paysim.Behaviour{})
	if !p.Up(ctx) {
		t.Error("Up after the outage = false")
	}
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		t.Error("the held webhook was not sent after the outage")
	}
}
