// Waiting room: joins the queue (idempotent: a refresh or a second tab keeps
// the same place), then polls the status as often as the gateway says
// (poll_after_ms), and shows the state in words. When the fan's turn comes
// it keeps the admit token for the booking page and offers the way in.
"use strict";

const eventId = location.pathname.split("/")[2];
const $ = (id) => document.getElementById(id);
let firstAhead = null;
let onsaleAt = null;

const words = {
  prequeue: "Waiting for the sale to open",
  waiting: "In line",
  paused: "Paused by the organisers",
  admitted: "Your turn",
  closed: "The sale has closed",
  sold_out: "Sold out",
  ended: "You have had your turn",
  not_open: "The queue is not open yet",
};

function show(id, on) { $(id).hidden = !on; }

function setState(state) {
  const el = $("state");
  el.textContent = words[state] || state;
  el.className = "state " + state;
  document.body.dataset.state = state;
}

function wait(seconds) {
  if (seconds < 0) return "waiting for the organisers to let people in";
  if (seconds < 60) return "about a minute to go";
  const m = Math.round(seconds / 60);
  return "about " + (m < 60 ? `${m} min` : `${Math.floor(m / 60)} h ${m % 60} min`) + " to go";
}

function ahead(n) {
  if (n === 0) return "you are next";
  return n === 1 ? "1 person ahead of you" : `${n.toLocaleString("en-IN")} people ahead of you`;
}

function tickCountdown() {
  if (!onsaleAt) return;
  const s = Math.max(0, Math.round((onsaleAt - Date.now()) / 1000));
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = s % 60;
  $("countdown").textContent = (h ? h + ":" : "") + String(m).padStart(2, "0") + ":" + String(sec).padStart(2, "0");
}
setInterval(tickCountdown, 1000);

function render(r) {
  setState(r.state);
  $("message").textContent = r.message || "";
  show("prequeue", r.state === "prequeue");
  show("line", r.state === "waiting" || r.state === "paused");
  show("turn", r.state === "admitted");
  if (r.state === "prequeue" && r.onsale_at) {
    onsaleAt = Date.parse(r.onsale_at);
    tickCountdown();
  }
  if (r.state === "waiting" || r.state === "paused") {
    $("position").textContent = r.position.toLocaleString("en-IN");
    $("ahead").textContent = ahead(r.ahead);
    $("eta").textContent = wait(r.eta_seconds);
    const key = "onsale.firstAhead." + eventId;
    firstAhead = firstAhead ?? Number(sessionStorage.getItem(key) ?? r.ahead);
    sessionStorage.setItem(key, firstAhead);
    $("progress").value = firstAhead > 0 ? Math.round(100 * (1 - r.ahead / firstAhead)) : 100;
    if (r.state === "paused") $("message").textContent = "Admission is paused for a moment. You keep your place.";
  }
  if (r.state === "admitted") {
    sessionStorage.setItem("onsale.admit." + eventId, r.admit_token);
    $("session-end").textContent = new Date(r.admit_expires_at).toLocaleTimeString();
    $("go-book").href = `/events/${eventId}/book`;
  }
}

async function call(method, path) {
  const res = await fetch(path, { method, headers: { Accept: "application/json" }, credentials: "same-origin" });
  let body = {};
  try { body = await res.json(); } catch (e) { /* not JSON */ }
  return { status: res.status, body, retry: Number(res.headers.get("Retry-After") || 0) };
}

async function poll() {
  let wait = 2000;
  try {
    const r = await call("GET", `/v1/events/${eventId}/queue/status`);
    if (r.status === 200) {
      render(r.body);
      wait = r.body.poll_after_ms || 2000;
      if (r.body.state === "closed" || r.body.state === "sold_out") wait = 30000;
    } else if (r.status === 401 || r.status === 409) {
      await join(); // no place yet, or the room was reset: (re)join
      wait = 500;
    } else if (r.status === 410) {
      setState(r.body.error === "session_ended" ? "ended" : "closed");
      $("message").textContent = r.body.message;
      return;
    } else {
      $("message").textContent = "We are busy; your place is safe. Retrying…";
      wait = Math.max(2000, r.retry * 1000);
    }
  } catch (e) {
    $("message").textContent = "Connection lost; your place is safe. Retrying…";
  }
  setTimeout(poll, wait);
}

async function join() {
  const r = await call("POST", `/v1/events/${eventId}/queue`);
  if (r.status === 200) {
    render(r.body);
  } else if (r.status === 409 && r.body.error === "not_open") {
    setState("not_open");
    $("message").textContent = "The queue opens at " + new Date(r.body.opens_at).toLocaleString() + ". Keep this page open.";
  } else if (r.status === 410) {
    setState(r.body.error === "session_ended" ? "ended" : "closed");
    $("message").textContent = r.body.message;
  } else if (r.status === 404) {
    $("message").textContent = "There is no such event.";
  } else {
    $("message").textContent = r.body.message || "We could not let you in the line just now; retrying…";
  }
}

async function start() {
  try {
    const ev = await call("GET", `/v1/events/${eventId}`);
    if (ev.status === 200) {
      $("event-name").textContent = ev.body.name + " · " + ev.body.venue.name;
      document.title = ev.body.name + " · waiting room";
    }
  } catch (e) { /* the line matters more than the title */ }
  const first = await call("GET", `/v1/events/${eventId}/queue/status`);
  if (first.status === 200) render(first.body); else await join();
  poll();
}

start();
