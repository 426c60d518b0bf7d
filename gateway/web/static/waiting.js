// Waiting room: joins the queue (idempotent: a refresh or a second tab keeps
// the same place), then polls the status as often as the gateway says
// (poll_after_ms), and shows the state in words. Only state changes are
// announced (aria-live); counters and countdowns are not. When the fan's
// turn comes it keeps the admit token for the booking page (localStorage,
// so another tab finds it), changes the tab's title, plays a short sound
// and shows a notification if the fan allowed one. An event that needs an
// account (join answers 401 identity_required) asks the fan to sign in;
// otherwise signing in is offered.
"use strict";

const eventId = location.pathname.split("/")[2];
const $ = (id) => document.getElementById(id);
const { api, el } = onsale;
const store = onsale.eventStore(eventId);
let firstAhead = null, onsaleAt = null, current = null, eventName = "", required = false, joinedAs = null;
let tz; // the venue's time zone: every time shown is the venue's, labelled
const queuePath = `/v1/events/${eventId}/queue`;

const words = {
  prequeue: "Waiting for the sale to open",
  waiting: "In line",
  paused: "Paused by the organisers",
  admitted: "Your turn",
  closed: "The sale has closed",
  sold_out: "Sold out",
  ended: "You have had your turn",
  not_open: "The queue is not open yet",
  signin: "Sign in to join the line",
};

function show(id, on) { $(id).hidden = !on; }
function setText(id, text) { if ($(id).textContent !== text) $(id).textContent = text; }

// setState changes the announced state only when it changes.
function setState(state) {
  if (state === current) return;
  current = state;
  const e = $("state");
  e.textContent = words[state] || state;
  e.className = "state " + state;
  document.body.dataset.state = state;
  show("prequeue", state === "prequeue");
  show("line", state === "waiting" || state === "paused");
  show("alerts", state === "prequeue" || state === "waiting" || state === "paused");
  show("turn", state === "admitted");
  show("ended", state === "ended");
  if (state === "admitted") yourTurn();
  else document.title = (eventName || "onsale") + " · " + (words[state] || "waiting room");
  if (state === "ended") {
    const b = store.get("booking") || store.get("hold") || store.get("done");
    if (b) {
      // This visit's booking first: a guest's is not under My tickets.
      $("ended-booking").href = `/events/${eventId}/book`;
      $("ended-booking").hidden = false;
      $("ended-booking").className = "button";
      $("ended-me").className = "button secondary";
    }
  }
}
// message shows a line under the state; once the turn is over the page
// says it in its own words (the ended card), not the server's.
function message(text) { setText("message", current === "ended" ? "" : text || ""); }

function minutes(seconds) {
  const m = Math.max(1, Math.round(seconds / 60));
  return m < 60 ? `${m} min` : `${Math.floor(m / 60)} h ${m % 60} min`;
}

// eta says how long, and what bounds it: the rate the organisers let fans
// in, or the number of fans allowed to shop at once (then the line moves
// as others finish).
function eta(r) {
  if (r.state === "paused" && r.ahead === 0) return "You are at the front of the line. Nobody is being let in right now; you go in first when admission resumes.";
  if (r.state === "paused" || r.eta_seconds < 0) return "Nobody is being let in right now, so we cannot estimate your wait. You keep your place.";
  const s = r.eta_seconds || 0;
  const about = s < 90 ? "About a minute" : "About " + minutes(s);
  if (r.ahead === 0 && r.bound_by === "active_users") return `You are next: ${about.toLowerCase()}. Only a set number of fans can shop at once, so you go in when one of them finishes.`;
  if (r.ahead === 0) return "You are next.";
  switch (r.bound_by) {
    case "active_users":
      return `${about}. Only a set number of fans can shop at once, so you go in as others finish.`;
    case "rate":
      return `${about}, at the pace fans are being let in.`;
    default:
      return `${about}, at the current pace.`;
  }
}

// tickCountdown counts down to the sale; once it opens, until the fan's
// next poll brings the drawn place (the gateway spreads the pre-queue's
// return over up to half a minute), the page says the draw is under way
// instead of standing at 0:00.
function tickCountdown() {
  if (!onsaleAt || current !== "prequeue") return;
  const left = onsaleAt - Date.now(), open = left <= 0;
  setText("state", open ? "The sale is open" : words.prequeue);
  show("opens-label", !open);
  setText("countdown", open ? "Drawing places…" : onsale.clock(left));
  show("drawing", open);
  show("prequeue-rule", !open);
  document.body.dataset.drawing = open ? "1" : "";
}
setInterval(tickCountdown, 1000);

function render(r) {
  setState(r.state);
  if (r.message) message(r.message);
  else if (r.state !== "paused") message("");
  if (r.state === "prequeue" && r.onsale_at) {
    onsaleAt = Date.parse(r.onsale_at);
    tickCountdown();
  }
  if (r.state === "waiting" || r.state === "paused") {
    setText("ahead", r.ahead.toLocaleString("en-IN"));
    setText("eta", eta(r));
    const key = "onsale.firstAhead." + eventId;
    firstAhead = firstAhead ?? Number(sessionStorage.getItem(key) ?? r.ahead);
    sessionStorage.setItem(key, firstAhead);
    const pct = firstAhead > 0 ? Math.round(100 * (1 - r.ahead / firstAhead)) : 100;
    $("progress").value = pct;
    $("progress").textContent = pct + "%";
    if (r.state === "paused") message("Admission is paused for a moment. You keep your place.");
  }
  if (r.state === "admitted") {
    store.set("admit", { token: r.admit_token, expires_at: r.admit_expires_at });
    setText("session-end", onsale.timeOfDay(r.admit_expires_at, tz));
    $("go-book").href = `/events/${eventId}/book`;
  }
}

// Turn alerts: the title (seen from another tab), a short sound and a
// notification when allowed. The sound needs the browser's consent, given
// by any click on the page (the alert button, for one).
let audio = null;
function unlockAudio() {
  try {
    audio = audio || new (window.AudioContext || window.webkitAudioContext)();
    if (audio.state === "suspended") audio.resume();
  } catch (e) { /* no sound then */ }
}
document.addEventListener("click", unlockAudio, { once: true });
function chime() {
  if (!audio || audio.state !== "running") return;
  const t = audio.currentTime;
  for (const [i, f] of [[0, 660], [1, 880]]) {
    const o = audio.createOscillator(), g = audio.createGain();
    o.frequency.value = f;
    g.gain.setValueAtTime(0.0001, t + i * 0.2);
    g.gain.exponentialRampToValueAtTime(0.3, t + i * 0.2 + 0.02);
    g.gain.exponentialRampToValueAtTime(0.0001, t + i * 0.2 + 0.18);
    o.connect(g).connect(audio.destination);
    o.start(t + i * 0.2);
    o.stop(t + i * 0.2 + 0.2);
  }
}
function yourTurn() {
  document.title = "Your turn! · " + (eventName || "onsale");
  document.body.dataset.alerted = "1";
  chime();
  if ("Notification" in window && Notification.permission === "granted" && document.visibilityState !== "visible") {
    try { new Notification("It's your turn", { body: `Choose your seats for ${eventName || "the show"} now.`, tag: "onsale-turn-" + eventId }); } catch (e) { /* some browsers need a service worker */ }
  }
}
function setupAlerts() {
  const s = $("notify-state");
  if (!("Notification" in window)) { $("notify").textContent = "Play a sound when it's my turn"; }
  else if (Notification.permission === "granted") { s.textContent = "We will alert you here when it's your turn."; }
  $("notify").addEventListener("click", async () => {
    unlockAudio();
    if ("Notification" in window && Notification.permission === "default") {
      try { await Notification.requestPermission(); } catch (e) { /* old browsers */ }
    }
    s.textContent = "Notification" in window && Notification.permission === "granted"
      ? "We will alert you here when it's your turn, with a sound and a notification."
      : "We will play a sound and change this tab's title when it's your turn.";
  });
}

// One poll timer at a time: every (re)start goes through schedule.
let pollTimer = null;
function schedule(ms) { clearTimeout(pollTimer); pollTimer = setTimeout(poll, ms); }

// retryIn is the wait before trying again after a refusal or a busy
// server: the Retry-After the gateway sent, else 1 s doubling to 30 s,
// spread a little so a crowd does not come back in one wave.
let retryMs = 1000;
function retryIn(r) {
  const ms = r && r.retry > 0 ? r.retry * 1000 : retryMs;
  retryMs = Math.min(retryMs * 2, 30000);
  return Math.round(ms * (1 + Math.random() * 0.2));
}

async function poll() {
  clearTimeout(pollTimer);
  let wait = 2000;
  try {
    const r = await api("GET", `${queuePath}/status`);
    if (r.status === 200) {
      retryMs = 1000;
      render(r.body);
      wait = r.body.poll_after_ms || 2000;
      if (r.body.state === "closed" || r.body.state === "sold_out") wait = 30000;
    } else if (r.status === 401 || r.status === 409) {
      const next = await join(); // no place yet, or the room was reset: (re)join
      if (next === null) return;
      wait = next;
    } else if (r.status === 410) {
      setState(r.body.error === "session_ended" ? "ended" : "closed");
      message(r.body.message);
      return;
    } else {
      message("We are busy; your place is safe. Retrying…");
      wait = retryIn(r);
    }
  } catch (e) {
    message("Connection lost; your place is safe. Retrying…");
    wait = retryIn(null);
  }
  schedule(wait);
}

// join asks for a place. It answers how long to wait before the next poll,
// or null when the fan must act first (sign in) or there is nothing to wait
// for; joined says whether this join got a place.
let joined = false, guestQueueToken = null;
async function join() {
  joined = false;
  let a = onsale.account();
  let r = await api("POST", queuePath, { token: a && a.token });
  if (r.status === 401 && r.body.error === "identity_required" && a) {
    // The stored account token is no good any more (expired, or signed
    // with a retired key): sign out and try as a guest; only if the event
    // refuses guests too does the fan have to sign in. What this browser
    // kept of the account's sales stays for when the fan signs in again.
    onsale.signOut(true);
    onsale.accountBar($("account-bar"), signedOut);
    a = null;
    r = await api("POST", queuePath);
  }
  joinedAs = a ? a.token : null;
  if (r.status === 200) {
    joined = true;
    retryMs = 1000;
    if (!a && r.body.queue_token) guestQueueToken = r.body.queue_token;
    if (required || a) $("signin-card").hidden = true;
    render(r.body);
    return 500;
  }
  if ((r.status === 401 && r.body.error === "identity_required") || r.body.error === "phone_not_verified") {
    required = true;
    setState("signin");
    message("This sale is for signed-in fans: one place in line and one ticket limit per person. Sign in with your mobile number to join.");
    offerSignin(true);
    return null;
  }
  if (r.status === 409 && r.body.error === "not_open") {
    setState("not_open");
    message("The queue opens on " + onsale.when(r.body.opens_at, tz) + ". Keep this page open: it joins the line by itself.");
    retryMs = 1000;
    // Come back when it opens (spread over a few seconds), not before.
    const until = Date.parse(r.body.opens_at) - Date.now();
    return Math.min(Math.max(1000, (until || 0) + Math.random() * 3000), 3600000);
  }
  if (r.status === 410) {
    setState(r.body.error === "session_ended" ? "ended" : "closed");
    message(r.body.message);
    return null;
  }
  if (r.status === 404) {
    message("There is no such event.");
    return null;
  }
  message(r.status === 429 || r.status === 503 ? "The line is very busy; we keep trying to let you in…"
    : r.body.message || "We could not let you in the line just now; retrying…");
  return retryIn(r);
}

// offerSignin shows the sign-in card: required (join waits for it) or
// optional (to find the tickets later under My tickets, on any device).
function offerSignin(must) {
  if (onsale.account() && !must) return;
  $("signin-card").hidden = false;
  $("signin-title").textContent = must ? "Sign in to join the line" : "Sign in (optional)";
  const box = $("signin");
  if (must) {
    onsale.signinForm(box, signedIn);
    return;
  }
  box.textContent = "";
  box.append(el("p", { text: "Sign in with your mobile number to find your tickets later in My tickets, on any device. You can also buy as a guest: we send the tickets to the phone or email you give at payment." }),
    el("button", { type: "button", class: "secondary", id: "signin-open", text: "Sign in with my mobile number", onclick: () => onsale.signinForm(box, signedIn) }));
}

async function signedIn() {
  onsale.accountBar($("account-bar"), signedOut);
  $("signin-card").hidden = true;
  if (required || current === "signin" || current === "prequeue" || current === "not_open" || current === null) {
    // Before the draw a guest place is worth nothing over a new one: the
    // account takes its own place, so the purchase is the account's; only
    // once it has one is the guest place given back (with the guest's own
    // queue token). A join never replaces another identity's place in the
    // cookie, so the cookie still names the guest's until it is given
    // back; joining again (idempotent) then puts the account's there.
    let guest = null;
    if (current === "prequeue") {
      guest = guestQueueToken;
      if (!guest) {
        // Joined before this page load: joining again as the same guest
        // is idempotent and hands back the guest's token.
        const g = await api("POST", queuePath).catch(() => null);
        if (g && g.status === 200 && g.body.state === "prequeue") guest = g.body.queue_token;
      }
    }
    current = null;
    message("");
    let next = await join();
    if (joined && joinedAs && guest) {
      await api("DELETE", queuePath, { token: guest }).catch(() => null);
      guestQueueToken = null;
      next = await join();
    }
    if (next !== null) schedule(next);
    return;
  }
  message("You are signed in. You keep your place in line; what you buy in this turn is sent to the phone or email you give at payment.");
}
function signedOut() { if (!required) offerSignin(false); }

async function start() {
  setupAlerts();
  onsale.accountBar($("account-bar"), signedOut);
  try {
    const ev = await api("GET", `/v1/events/${eventId}`);
    if (ev.status === 200) {
      eventName = ev.body.name;
      tz = ev.body.venue && ev.body.venue.timezone;
      onsale.showHeader(ev.body);
      document.title = ev.body.name + " · waiting room";
    }
  } catch (e) { /* the line matters more than the title */ }
  const first = await api("GET", `${queuePath}/status`).catch(() => ({ status: 0 }));
  let next = 0;
  if (first.status === 200) render(first.body);
  else next = await join();
  if (next !== null && !required && !onsale.account()) offerSignin(false);
  if (next !== null) schedule(next);
}

start();
