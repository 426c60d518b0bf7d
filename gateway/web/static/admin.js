/*
 * admin.js: the onsale operator console (served at /admin/).
 *
 * The operator signs in with their name and password (POST
 * /operator/v1/sessions, passed to the core): the session token is kept in
 * sessionStorage, so a reload stays signed in. They pick a show (or open
 * /admin/?event=<id>); every show of every status is listed by title,
 * venue, date and time in the venue's zone, status and id, and the show
 * acted on is named above the console and in every confirmation.
 * The page shows the event's dials as a form and PATCHes only the dials the
 * operator changed. Beside the rate dial it shows the rate the line is let
 * in at now (the dial times the core-health factor every gateway shares)
 * and, when the two differ, why: the booking service's trouble as the
 * gateways judged it ("core hold p90 1.8 s", "core 503s 12%"). While the tab is visible it polls once a second: one
 * GET /admin/v1/events/{id} (dials and waiting-room stats) and one
 * GET /v1/events/{id}/stats (seats available, held, sold), and draws the last
 * five minutes on small canvas charts with plot(), a helper at the end.
 * Pausing, and a large change of the rate dial, ask for confirmation
 * naming the show. The live view says what bounds the line (the rate dial,
 * the active-users cap or a pause) and the drain time that follows.
 *
 * No dependencies and nothing inline: the page runs under a strict CSP.
 * document.body.dataset.ready becomes "1" after the first stats render.
 */
"use strict";

const TOKEN_KEY = "onsale.admin";
const OPERATOR_KEY = "onsale.operator"; // { name, role, display_name } of the signed-in operator
const ROLE_LABELS = { admin: "admin", box_office: "box office", sale_desk: "sale desk" };
// A rate change of more than this factor either way, or to 0, asks first.
const LARGE_RATE_CHANGE = 2;
const ZERO_TIME = "0001-01-01T00:00:00Z"; // the API's "unset" time
const POLL_MS = 1000;
const WINDOW_MS = 5 * 60 * 1000;          // what the charts show
const GAP_MS = 3500;                       // a longer gap between samples breaks a line
const REQUEST_TIMEOUT_MS = 5000;

// The dials the form edits. The id is the input's id and the JSON name.
const DIALS = [
  { id: "new_users_per_minute", kind: "int", label: "new users per minute" },
  { id: "total_active_users", kind: "int", label: "max active users" },
  { id: "session_seconds", kind: "int", label: "session length" },
  { id: "claim_seconds", kind: "int", label: "claim window" },
  { id: "account_required", kind: "bool", label: "signed-in fans only" },
  { id: "queueing", kind: "text", label: "queueing" },
  { id: "prequeue_at", kind: "time", label: "pre-queue opens" },
  { id: "onsale_at", kind: "time", label: "on sale" },
  { id: "closes_at", kind: "time", label: "line closes" },
];

const $ = (id) => document.getElementById(id);
const ui = {
  signinForm: $("signin-form"), name: $("operator-name"), password: $("operator-password"), signedIn: $("signed-in"),
  signout: $("signout"), signedInAs: $("signed-in-as"), signedInRole: $("signed-in-role"), actingOn: $("acting-on"),
  bound: $("bound"), confirm: $("confirm"), confirmText: $("confirm-text"), confirmYes: $("confirm-yes"),
  event: $("event"), message: $("message"), console: $("console"), state: $("state"), updated: $("updated"),
  dials: $("dials"), fields: $("dials-fields"), pause: $("pause"), save: $("save"), revert: $("revert"),
  tzNote: $("tz-note"),
};
const charts = {
  admitted: $("chart-admitted"), queued: $("chart-queued"), active: $("chart-active"), seats: $("chart-seats"),
};

const state = {
  token: "",
  operator: null,    // { name, role, display_name }
  eventId: "",
  events: new Map(), // id -> the show as listed (title, venue, times, status)
  dials: null,       // the dials last applied
  version: -1,       // their version: an older poll reply never overwrites a newer PATCH reply
  baseline: {},      // dial id -> input value as last loaded from the server (what "changed" compares to)
  history: [],       // samples { t, admitted, dial, effective, queued, active, held, sold }, oldest first
  asOf: 0,           // server time of the last stats, in ms
  gen: 0,            // bumped to end a polling loop and drop its in-flight replies
  timer: 0,
  verifying: false,  // a sign-in waits for its first reply
  busy: false,       // a PATCH is in flight
  factor: 1,         // share of the dial the core's health allows, as of the last stats
};

const numberFmt = new Intl.NumberFormat();
const compactFmt = new Intl.NumberFormat(undefined, { notation: "compact", maximumFractionDigits: 1 });
const dateFmt = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });
const clockFmt = new Intl.DateTimeFormat(undefined, { timeStyle: "medium" });

/* ---------- small helpers ---------- */

// setText changes an element's text only when it differs (no flicker, no
// repeated screen-reader announcements).
function setText(el, text) {
  if (el.textContent !== text) el.textContent = text;
}

function showMessage(text, kind = "info") {
  ui.message.textContent = text;
  ui.message.dataset.kind = kind;
}

function fmtInt(n) {
  return typeof n === "number" && Number.isFinite(n) ? numberFmt.format(n) : "—";
}

// fmtDuration turns seconds into "3 min 20 s" ("—" when unknown, i.e. -1).
function fmtDuration(s) {
  if (typeof s !== "number" || s < 0) return "—";
  s = Math.round(s);
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = s % 60;
  if (h) return `${h} h ${m} min`;
  if (m) return `${m} min ${sec} s`;
  return `${sec} s`;
}

// timeMs parses an RFC 3339 time; null when missing or the zero ("unset") time.
function timeMs(iso) {
  const ms = Date.parse(iso || "");
  return Number.isNaN(ms) || new Date(ms).getUTCFullYear() <= 1 ? null : ms;
}

const pad = (n) => String(n).padStart(2, "0");

// isoToLocal turns an RFC 3339 time into a datetime-local value in the
// browser's time zone ("" for an unset time).
function isoToLocal(iso) {
  const ms = timeMs(iso);
  if (ms === null) return "";
  const d = new Date(ms);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}` +
    `T${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

// localToIso turns a datetime-local value (local time) into UTC RFC 3339,
// parsing the parts by hand so no browser guesses the zone.
function localToIso(value) {
  if (value === "") return ZERO_TIME;
  const m = /^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d)(?::(\d\d)(?:\.\d+)?)?$/.exec(value);
  if (!m) return null;
  const d = new Date(+m[1], +m[2] - 1, +m[3], +m[4], +m[5], +(m[6] || 0));
  return d.toISOString().replace(/\.\d{3}Z$/, "Z");
}

// zoneNote describes the browser's time zone, e.g. "Asia/Kolkata, UTC+05:30".
function zoneNote() {
  const off = -new Date().getTimezoneOffset();
  const sign = off >= 0 ? "+" : "\u2212";
  const utc = `UTC${sign}${pad(Math.floor(Math.abs(off) / 60))}:${pad(Math.abs(off) % 60)}`;
  const name = Intl.DateTimeFormat().resolvedOptions().timeZone;
  return name && name !== "UTC" ? `${name}, ${utc}` : utc;
}

/* ---------- token ---------- */

function loadToken() {
  try { return sessionStorage.getItem(TOKEN_KEY) || ""; } catch { return ""; }
}

function storeToken(token, operator) {
  try {
    if (token) {
      sessionStorage.setItem(TOKEN_KEY, token);
      sessionStorage.setItem(OPERATOR_KEY, JSON.stringify(operator || null));
    } else {
      sessionStorage.removeItem(TOKEN_KEY);
      sessionStorage.removeItem(OPERATOR_KEY);
    }
  } catch { /* storage disabled: the token lives for this page only */ }
}

function loadOperator() {
  try { return JSON.parse(sessionStorage.getItem(OPERATOR_KEY) || "null"); } catch { return null; }
}

/* ---------- API ---------- */

// api sends one JSON request; it throws an Error with .status and the
// server's message when the reply is not 2xx.
async function api(method, path, body) {
  const headers = { Accept: "application/json" };
  if ((path.startsWith("/admin/") || path.startsWith("/operator/")) && state.token) headers.Authorization = `Bearer ${state.token}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), REQUEST_TIMEOUT_MS);
  let res;
  try {
    res = await fetch(path, {
      method, headers, cache: "no-store", credentials: "same-origin", signal: abort.signal,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch {
    throw apiError(0, abort.signal.aborted ? "The server did not answer in time." : "The server could not be reached.");
  } finally {
    clearTimeout(timer);
  }
  const data = await res.json().catch(() => null);
  if (!res.ok) throw apiError(res.status, (data && data.message) || `The server answered ${res.status}.`);
  return data;
}

function apiError(status, message) {
  const err = new Error(message);
  err.status = status;
  return err;
}

const adminPath = () => `/admin/v1/events/${encodeURIComponent(state.eventId)}`;
const countsPath = () => `/v1/events/${encodeURIComponent(state.eventId)}/stats`;

/* ---------- events ---------- */

// showTime is a show's start in its venue's zone: "Sat 20 Dec 2026, 18:30".
function showTime(ev) {
  const ms = timeMs(ev.starts_at);
  if (ms === null) return "";
  const zone = ev.venue && ev.venue.timezone;
  try {
    return new Intl.DateTimeFormat(undefined, { weekday: "short", day: "numeric", month: "short", year: "numeric",
      hour: "2-digit", minute: "2-digit", timeZone: zone || undefined }).format(ms);
  } catch {
    return dateFmt.format(ms);
  }
}

// eventLabel names a show so that four shows of one film tell apart:
// title, venue, date and time (the venue's), status and id.
function eventLabel(ev) {
  const venue = ev.venue ? [ev.venue.name, ev.venue.city].filter(Boolean).join(", ") : "";
  return [ev.name || `Show ${ev.id}`, venue, showTime(ev), ev.status || "", `#${ev.id}`].filter(Boolean).join(" · ");
}

// showName is the short name of the selected show for confirmations.
function showName() {
  const ev = state.events.get(state.eventId);
  return ev ? `${ev.name} · ${showTime(ev)} · #${ev.id}` : `show #${state.eventId}`;
}

function addEventOption(id, label) {
  const opt = document.createElement("option");
  opt.value = String(id);
  opt.textContent = label;
  ui.event.append(opt);
}

// loadEvents fills the selector from /v1/events and picks ?event=<id>
// (kept even when the catalog does not list it) or the first event.
async function loadEvents() {
  const wanted = new URLSearchParams(location.search).get("event");
  const preset = wanted && /^\d+$/.test(wanted) ? wanted : "";
  ui.event.textContent = "";
  state.events.clear();
  try {
    const data = await api("GET", "/operator/v1/events?limit=200");
    for (const ev of (data && data.events) || []) {
      state.events.set(String(ev.id), ev);
      addEventOption(ev.id, eventLabel(ev));
    }
  } catch (err) {
    if (err.status === 401) {
      signOut("Your session was refused or has expired. Sign in again.");
      return;
    }
    showMessage(`Could not load the shows: ${err.message}`, "error");
  }
  ui.event.disabled = false;
  if (preset && ![...ui.event.options].some((o) => o.value === preset)) addEventOption(preset, `Show #${preset}`);
  if (!ui.event.options.length) {
    addEventOption("", "No events");
    ui.event.disabled = true;
  }
  ui.event.value = preset || ui.event.options[0].value;
  selectEvent(ui.event.value);
}

function selectEvent(id) {
  state.eventId = id;
  if (id) history.replaceState(null, "", `?event=${encodeURIComponent(id)}`);
  renderActingOn();
  resetConsole();
  noteDraft();
  startPolling();
}

// DRAFT_CHECK_MS is how often the console looks whether a draft it is on
// has been published.
const DRAFT_CHECK_MS = 10000;

// noteDraft says why a draft's console stays empty (and takes this note,
// or checkShow's about the show, away again once it no longer holds).
function noteDraft() {
  if (isDraft()) {
    showMessage("This show is a draft: fans cannot see it, and its waiting room opens once it is published (Shows and venues). Set its dials then, before the sale opens.", "info");
    ui.message.dataset.note = "1";
  } else if (ui.message.dataset.note) {
    showMessage("");
    delete ui.message.dataset.note;
  }
}

// renderActingOn names the show every control below acts on.
function renderActingOn() {
  const ev = state.events.get(state.eventId);
  ui.actingOn.hidden = !state.token || !state.eventId;
  setText(ui.actingOn, ev ? `Acting on: ${eventLabel(ev)}` : `Acting on: show #${state.eventId}`);
}

// resetConsole forgets the previous event: form, numbers and charts.
function resetConsole() {
  state.dials = null;
  state.version = -1;
  state.baseline = {};
  state.history = [];
  ui.fields.disabled = true;
  for (const d of DIALS) {
    writeInput(d, d.kind === "bool" ? "false" : "");
    $(d.id).classList.remove("dirty");
  }
  for (const el of document.querySelectorAll(".stat dd")) setText(el, "—");
  setText($("stat-dial"), "—");
  setText($("stat-effective"), "—");
  setText($("stat-share"), "");
  setText($("rate-why"), "");
  $("rate").dataset.health = "unknown";
  state.factor = 1;
  setState("unknown", "—");
  setText(ui.updated, "");
  drawCharts();
}

/* ---------- sign in / out ---------- */

async function signIn(event) {
  event.preventDefault();
  const name = ui.name.value.trim(), password = ui.password.value;
  if (!name || !password) return;
  showMessage("Signing in…", "info");
  let reply;
  try {
    reply = await api("POST", "/operator/v1/sessions", { name, password });
  } catch (err) {
    showMessage(err.status === 401 ? "Wrong name or password, or the account is disabled." : err.message, "error");
    ui.password.select();
    return;
  }
  state.token = reply.token;
  state.operator = reply.operator;
  storeToken(state.token, state.operator);
  ui.password.value = "";
  state.verifying = true;
  renderAuth();
  await loadEvents();
  showMessage(state.eventId ? "Signed in." : "Signed in. Choose a show.", "ok");
}

function signOut(message) {
  stopPolling();
  state.token = "";
  state.operator = null;
  state.verifying = false;
  storeToken("");
  renderAuth();
  showMessage(message || "Signed out.", message ? "error" : "info");
  ui.name.focus();
}

function renderAuth() {
  const signedIn = Boolean(state.token);
  ui.signinForm.hidden = signedIn;
  ui.signedIn.hidden = !signedIn;
  ui.console.hidden = !signedIn || !state.eventId;
  const op = state.operator || {};
  setText(ui.signedInAs, op.display_name || op.name || "an operator");
  setText(ui.signedInRole, op.role ? `(${ROLE_LABELS[op.role] || op.role})` : "");
  renderActingOn();
  if (!ui.console.hidden) drawCharts();
}

// confirmAction asks before a dangerous change, naming the show; resolves
// true when the operator confirms.
function confirmAction(title, text, yes) {
  if (typeof ui.confirm.showModal !== "function") return Promise.resolve(window.confirm(`${title}\n\n${text}`));
  setText($("confirm-title"), title);
  setText(ui.confirmText, text);
  setText(ui.confirmYes, yes);
  return new Promise((resolve) => {
    // The close event is queued: the previous question's may arrive after
    // this one opened (Cancel, then the button again at once). Only a close
    // that left the dialog closed answers this question.
    const done = () => {
      if (ui.confirm.open) return;
      ui.confirm.removeEventListener("close", done);
      resolve(ui.confirm.returnValue === "yes");
    };
    ui.confirm.addEventListener("close", done);
    ui.confirm.returnValue = "";
    ui.confirm.showModal();
    $("confirm-no").focus();
  });
}

/* ---------- polling ---------- */

// isDraft: the show is a draft, so it has no waiting room yet (the gateway
// answers 404 for it, as it does fans).
const isDraft = () => state.events.get(state.eventId)?.status === "draft";
const canPoll = () => Boolean(state.token && state.eventId) && document.visibilityState === "visible";

function startPolling() {
  stopPolling();
  renderAuth();
  if (!canPoll()) return;
  if (isDraft() || !state.events.has(state.eventId)) checkShow(state.gen);
  else poll(state.gen);
}

// checkShow reads the show the console is on (a draft, or one not in the
// list): a draft is looked at again every DRAFT_CHECK_MS until it is
// published (here or in another tab), then the console polls its room.
async function checkShow(gen) {
  try {
    const ev = await api("GET", `/operator/v1/events/${encodeURIComponent(state.eventId)}`);
    if (gen !== state.gen) return;
    if (ev && ev.id !== undefined) {
      state.events.set(String(ev.id), ev);
      const opt = [...ui.event.options].find((o) => o.value === String(ev.id));
      if (opt) opt.textContent = eventLabel(ev);
      renderActingOn();
    }
  } catch (err) {
    if (gen !== state.gen) return;
    if (err.status === 401) {
      signOut("Your session was refused or has expired. Sign in again.");
      return;
    }
    if (err.status === 404) {
      showMessage(`There is no show #${state.eventId}. Pick one from the list.`, "error");
      ui.message.dataset.note = "1";
      return;
    }
    // The core or the network failed: look again later.
    showMessage(`Could not read show #${state.eventId}: ${err.message} Trying again.`, "error");
    ui.message.dataset.note = "1";
    state.timer = setTimeout(() => checkShow(gen), DRAFT_CHECK_MS);
    return;
  }
  noteDraft();
  if (isDraft()) {
    state.verifying = false; // the note says what signing in led to
    state.timer = setTimeout(() => checkShow(gen), DRAFT_CHECK_MS);
  } else poll(gen);
}

function stopPolling() {
  state.gen++;
  clearTimeout(state.timer);
}

// poll fetches once, then schedules itself so each round starts a second
// after the last one began (never two rounds at once).
async function poll(gen) {
  const began = performance.now();
  await refresh(gen);
  if (gen !== state.gen) return;
  state.timer = setTimeout(() => poll(gen), Math.max(0, POLL_MS - (performance.now() - began)));
}

async function refresh(gen) {
  const [admin, counts] = await Promise.allSettled([api("GET", adminPath()), api("GET", countsPath())]);
  if (gen !== state.gen) return; // signed out, switched event or hid the tab meanwhile
  if (admin.status === "rejected" && admin.reason.status === 401) {
    signOut("Your session was refused or has expired. Sign in again.");
    return;
  }
  const a = admin.status === "fulfilled" ? admin.value : null;
  const c = counts.status === "fulfilled" ? counts.value : null;
  if (a) applyAdmin(a, false);
  if (c) renderCounts(c);
  record(a, c);
  renderUpdated(admin.status === "rejected" ? admin.reason : counts.status === "rejected" ? counts.reason : null);
  drawCharts();
  if (a && state.verifying) {
    state.verifying = false;
    showMessage("Signed in.", "ok");
  }
  if (a && c) document.body.dataset.ready = "1";
}

function renderUpdated(err) {
  const last = state.history.length ? state.history[state.history.length - 1].t : 0;
  ui.updated.classList.toggle("stale", Boolean(err));
  if (!err) setText(ui.updated, `Updated ${clockFmt.format(last)}`);
  else setText(ui.updated, `Not updating: ${err.message}`);
}

// record keeps one chart sample per poll (null where a request failed).
function record(a, c) {
  const s = a && a.stats;
  state.history.push({
    t: Date.now(),
    admitted: s ? s.admitted_per_minute : null,
    dial: a ? a.dials.new_users_per_minute : null,
    effective: a && typeof a.stats.effective_per_minute === "number" ? a.stats.effective_per_minute : null,
    queued: s ? s.queued : null,
    active: s ? s.active : null,
    held: c ? c.held : null,
    sold: c ? c.sold : null,
  });
  const oldest = Date.now() - WINDOW_MS - GAP_MS;
  while (state.history.length && state.history[0].t < oldest) state.history.shift();
}

/* ---------- rendering ---------- */

// applyAdmin shows a GET or PATCH reply: dials (unless older than those
// shown) and the waiting room's numbers.
function applyAdmin(reply, force) {
  const { dials, stats } = reply;
  if (dials.version >= state.version || force) {
    state.dials = dials;
    state.version = dials.version;
    fillForm(dials, force || ui.fields.disabled);
    ui.fields.disabled = false;
  }
  const asOf = timeMs(stats.as_of);
  state.asOf = asOf === null ? Date.now() : asOf;
  setText($("stat-queued"), fmtInt(stats.queued));
  setText($("stat-admitted"), fmtInt(stats.admitted_per_minute));
  setText($("stat-active"), fmtInt(stats.active));
  setText($("stat-drain"), stats.bound === "paused" ? "never (paused)" : fmtDuration(stats.drain_seconds));
  renderBound(state.dials, stats);
  renderRate(state.dials, stats, reply.health);
  renderSaleState();
}

// renderRate shows the dial and the rate the line is let in at side by
// side, and why they differ: the gateways lower the rate while the booking
// service is unwell and raise it again by themselves (gateway/health).
function renderRate(dials, stats, health) {
  const dial = dials.new_users_per_minute;
  const h = health || { state: "off" };
  const effective = typeof stats.effective_per_minute === "number" ? stats.effective_per_minute : dial;
  const factor = typeof stats.factor === "number" ? stats.factor : 1;
  const pct = Math.round(factor * 100);
  setText($("stat-dial"), fmtInt(dial));
  setText($("stat-effective"), fmtInt(Math.round(effective)));
  setText($("stat-share"), factor < 1 && dial > 0 ? `${pct}% of the dial` : "");
  let kind = h.state, why;
  switch (h.state) {
    case "lowered":
      why = `Lowered to ${pct}% of the dial: the booking service is struggling (${h.reason || "core unwell"}). ` +
        "It climbs back by itself once the core is well.";
      break;
    case "recovering": {
      const step = h.step > 0 ? h.step : 0.05, every = h.window_seconds > 0 ? h.window_seconds : 1;
      const back = Math.ceil(Math.max(0, 1 - factor) / step - 1e-9) * every;
      why = `Recovering: ${pct}% of the dial, rising ${Math.round(step * 100)}% of the dial every ${every === 1 ? "second" : fmtDuration(every)} ` +
        `while the booking service stays well (at the dial in about ${fmtDuration(back)})` +
        (h.reason ? `. Last lowered for: ${h.reason}.` : ".");
      break;
    }
    case "ok":
      why = "At the dial: the booking service is keeping up.";
      break;
    case "off":
      why = "Core-health feedback is off on this gateway: fans are let in at the dial whatever the booking service's state.";
      break;
    default:
      kind = "unknown";
      why = "The booking service's health has not been read yet.";
  }
  if (factor < 1 && kind === "ok") kind = "recovering"; // the tick's factor lags the health's by a tick
  state.factor = dial > 0 ? factor : 1;
  $("rate").dataset.health = kind;
  setText($("rate-why"), why);
}

// renderBound says what lets the line in now, so the drain time reads
// right: a full room drains as sessions end, whatever the rate dial says.
function renderBound(dials, stats) {
  const per = typeof stats.bound_per_minute === "number" ? fmtInt(Math.round(stats.bound_per_minute)) : "—";
  let text;
  switch (stats.bound) {
    case "paused":
      text = "Bound by the pause: nobody is let in and the line does not drain until admission resumes.";
      break;
    case "active_cap":
      text = `Bound by the active-users cap: ${fmtInt(stats.active)} of ${fmtInt(dials.total_active_users)} sessions in use, ` +
        `so fans go in as sessions end, about ${per} a minute. Raising the rate dial will not drain the line faster.`;
      break;
    case "rate":
      text = `Bound by the rate dial: ${per} a minute` + (state.factor < 1 ? " (lowered by the core's health)." : ".");
      break;
    default:
      text = "";
  }
  ui.bound.dataset.bound = stats.bound || "unknown";
  setText(ui.bound, text);
}

function renderCounts(c) {
  setText($("stat-available"), fmtInt(c.available));
  setText($("stat-held"), fmtInt(c.held));
  setText($("stat-sold"), fmtInt(c.sold));
}

// saleState names where the sale stands at server time now.
function saleState(d, now) {
  const closes = timeMs(d.closes_at), onsale = timeMs(d.onsale_at), pre = timeMs(d.prequeue_at);
  if (d.sold_out) return ["sold-out", "sold out"];
  if (closes !== null && now >= closes) return ["closed", "closed"];
  if (d.paused) return ["paused", "paused"];
  if (onsale !== null && now < onsale) {
    return pre !== null && now >= pre ? ["prequeue", "pre-queue open, not yet on sale"] : ["before", "not yet on sale"];
  }
  return ["admitting", "admitting"];
}

function renderSaleState() {
  let [key, text] = saleState(state.dials, state.asOf);
  if (key === "admitting" && state.factor < 1) {
    // The top line says it too: on a phone the rate panel may be off screen.
    [key, text] = ["slowed", `admitting at ${Math.round(state.factor * 100)}% of the dial`];
  }
  setState(key, text);
  const label = state.dials.paused ? "Resume admission" : "Pause admission";
  setText(ui.pause, label);
  ui.pause.dataset.paused = String(state.dials.paused);
}

function setState(key, text) {
  ui.state.dataset.state = key;
  setText(ui.state, text);
}

/* ---------- the dials form ---------- */

// A dial's form value is a string: a checkbox (a bool dial) reads and
// writes "true" or "false" through its checked state.
function readInput(dial) {
  const input = $(dial.id);
  return dial.kind === "bool" ? String(input.checked) : input.value;
}

function writeInput(dial, value) {
  if (dial.kind === "bool") $(dial.id).checked = value === "true";
  else $(dial.id).value = value;
}

function toInput(dial, value) {
  if (dial.kind === "time") return isoToLocal(value);
  if (dial.kind === "bool") return String(value === true);
  return value === undefined || value === null ? "" : String(value);
}

// fromInput reads an input as the API wants it; undefined when invalid.
function fromInput(dial, value) {
  if (dial.kind === "time") return localToIso(value) ?? undefined;
  if (dial.kind === "bool") return value === "true";
  if (dial.kind === "int") {
    const n = Number(value);
    return value !== "" && Number.isInteger(n) ? n : undefined;
  }
  return value;
}

// fillForm puts the server's dials in the form. Fields the operator is
// editing (changed or focused) keep their text unless force is set.
function fillForm(dials, force) {
  for (const d of DIALS) {
    const input = $(d.id);
    const editing = readInput(d) !== state.baseline[d.id] || input === document.activeElement;
    if (!force && editing) continue;
    writeInput(d, toInput(d, dials[d.id]));
    state.baseline[d.id] = readInput(d); // as the browser normalised it
  }
  markDirty();
}

function changedDials() {
  return DIALS.filter((d) => readInput(d) !== state.baseline[d.id]);
}

function markDirty() {
  const changed = new Set(changedDials().map((d) => d.id));
  for (const d of DIALS) $(d.id).classList.toggle("dirty", changed.has(d.id));
}

async function save(event) {
  event.preventDefault();
  const changed = changedDials();
  if (!changed.length) {
    showMessage("Nothing to save: no dial was changed.", "info");
    return;
  }
  const patch = {};
  for (const d of changed) {
    const value = fromInput(d, readInput(d));
    if (value === undefined) {
      showMessage(`Check ${d.label}: the value is not valid.`, "error");
      $(d.id).focus();
      return;
    }
    patch[d.id] = value;
  }
  const before = state.dials ? state.dials.new_users_per_minute : 0, after = patch.new_users_per_minute;
  if (after !== undefined && before > 0 && (after === 0 || after > before * LARGE_RATE_CHANGE || after * LARGE_RATE_CHANGE < before)) {
    const ok = await confirmAction("Change the rate a lot?",
      `Change the rate dial of ${showName()} from ${fmtInt(before)} to ${fmtInt(after)} a minute?`, "Change the rate");
    if (!ok) {
      showMessage("Nothing saved.", "info");
      return;
    }
  }
  await send(patch, true, `Saved: ${changed.map((d) => d.label).join(", ")}.`);
}

function revert() {
  if (state.dials) fillForm(state.dials, true);
  showMessage("Changes discarded.", "info");
}

async function togglePause() {
  if (!state.dials) return;
  const paused = !state.dials.paused;
  if (paused && !(await confirmAction("Pause admission?",
    `Pause admission to ${showName()}? Nobody is let in from the line until you resume; nobody loses their place.`, "Pause admission"))) {
    showMessage("Admission not paused.", "info");
    return;
  }
  send({ paused }, false, paused ? "Admission paused." : "Admission resumed.");
}

// send PATCHes the dials and shows the reply; force refills the whole form
// (after Save every edit was sent; a pause keeps edits in progress).
async function send(patch, force, okText) {
  if (state.busy) return;
  const eventId = state.eventId;
  state.busy = true;
  ui.save.disabled = ui.pause.disabled = true;
  try {
    const reply = await api("PATCH", adminPath(), patch);
    if (eventId !== state.eventId) return;
    applyAdmin(reply, force);
    record(reply, null);
    drawCharts();
    showMessage(okText, "ok");
  } catch (err) {
    if (err.status === 401) signOut("Your session was refused or has expired. Sign in again.");
    else showMessage(err.message, "error");
  } finally {
    state.busy = false;
    ui.save.disabled = ui.pause.disabled = false;
  }
}

/* ---------- charts ---------- */

const series = (key) => state.history.map((s) => [s.t, s[key]]);

function drawCharts() {
  if (ui.console.hidden) return;
  const t1 = Date.now(), t0 = t1 - WINDOW_MS;
  plot(charts.admitted, [
    { points: series("admitted"), color: "--c-measured" },
    { points: series("effective"), color: "--c-effective", step: true },
    { points: series("dial"), color: "--c-dial", step: true, dash: [6, 4] }, // over the effective rate where they meet
  ], t0, t1);
  plot(charts.queued, [{ points: series("queued"), color: "--c-measured" }], t0, t1);
  plot(charts.active, [{ points: series("active"), color: "--c-measured" }], t0, t1);
  plot(charts.seats, [
    { points: series("held"), color: "--c-held" },
    { points: series("sold"), color: "--c-sold" },
  ], t0, t1);
}

// niceTop rounds a maximum up so the four y steps are round numbers.
function niceTop(max) {
  const step = Math.max(1, max / 4);
  const p = 10 ** Math.floor(Math.log10(step));
  const m = [1, 2, 2.5, 5, 10].find((k) => k * p >= step && (k !== 2.5 || p >= 10));
  return 4 * m * p;
}

/*
 * plot draws line series over a time window [t0, t1] on a canvas, sized to
 * the canvas's CSS box times devicePixelRatio. A series is
 * { points: [[timeMs, value | null], ...], color: "--css-variable", step, dash }.
 * Null values are skipped, gaps longer than GAP_MS break the line; step draws a
 * staircase (for dials). The y axis runs from 0; x shows minutes back.
 */
function plot(canvas, list, t0, t1) {
  const w = canvas.clientWidth, h = canvas.clientHeight;
  if (!w || !h) return;
  const dpr = window.devicePixelRatio || 1;
  if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
    canvas.width = Math.round(w * dpr);
    canvas.height = Math.round(h * dpr);
  }
  const ctx = canvas.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, w, h);
  const css = getComputedStyle(canvas);
  const color = (name) => css.getPropertyValue(name).trim() || "#777";
  ctx.font = `12px ${css.fontFamily}`;

  // Scales: y from 0 to a round number over the largest visible value.
  let max = 0;
  for (const s of list) for (const [t, v] of s.points) if (v !== null && t >= t0) max = Math.max(max, v);
  const top = niceTop(max);
  const labels = [0, 1, 2, 3, 4].map((i) => compactFmt.format((top * i) / 4));
  const left = 12 + Math.max(...labels.map((l) => ctx.measureText(l).width));
  const box = { x: left, y: 8, w: Math.max(1, w - left - 16), h: Math.max(1, h - 30) };
  const X = (t) => box.x + ((t - t0) / (t1 - t0)) * box.w;
  const Y = (v) => box.y + box.h - (v / top) * box.h;

  // Horizontal grid lines with y labels, then minutes back along the bottom.
  ctx.lineWidth = 1;
  ctx.strokeStyle = color("--chart-grid");
  ctx.fillStyle = color("--chart-ink");
  ctx.textAlign = "right";
  ctx.textBaseline = "middle";
  labels.forEach((label, i) => {
    const y = Math.round(Y((top * i) / 4)) + 0.5;
    ctx.beginPath();
    ctx.moveTo(box.x, y);
    ctx.lineTo(box.x + box.w, y);
    ctx.stroke();
    ctx.fillText(label, box.x - 6, y);
  });
  ctx.textBaseline = "top";
  ctx.textAlign = "center";
  const minutes = Math.round((t1 - t0) / 60000), every = box.w / minutes < 56 ? 2 : 1;
  for (let m = 0; m <= minutes; m += every) {
    ctx.fillText(m === 0 ? "now" : `\u2212${m} min`, X(t1 - m * 60000), box.y + box.h + 8);
  }

  // The lines, clipped to the plot, each with a dot on its latest value.
  ctx.save();
  ctx.beginPath();
  ctx.rect(box.x, 0, box.w + 4, box.y + box.h + 2);
  ctx.clip();
  for (const s of list) {
    ctx.strokeStyle = ctx.fillStyle = color(s.color);
    ctx.lineWidth = 2;
    ctx.lineJoin = "round";
    ctx.setLineDash(s.dash || []);
    ctx.beginPath();
    let prev = null;
    for (const [t, v] of s.points) {
      if (v === null || v === undefined) continue; // a failed request: time gaps break lines
      if (!prev || t - prev[0] > GAP_MS) ctx.moveTo(X(t), Y(v));
      else {
        if (s.step) ctx.lineTo(X(t), Y(prev[1]));
        ctx.lineTo(X(t), Y(v));
      }
      prev = [t, v];
    }
    ctx.stroke();
    if (prev) {
      ctx.beginPath();
      ctx.arc(X(prev[0]), Y(prev[1]), 3, 0, 2 * Math.PI);
      ctx.fill();
    }
  }
  ctx.restore();
}

/* ---------- start ---------- */

function init() {
  ui.tzNote.textContent = `Times are in your time zone (${zoneNote()}).`;
  ui.signinForm.addEventListener("submit", signIn);
  ui.signout.addEventListener("click", () => signOut());
  ui.event.addEventListener("change", () => selectEvent(ui.event.value));
  ui.dials.addEventListener("submit", save);
  ui.dials.addEventListener("input", markDirty);
  ui.dials.addEventListener("change", markDirty);
  ui.revert.addEventListener("click", revert);
  ui.pause.addEventListener("click", togglePause);
  document.addEventListener("visibilitychange", () => (document.visibilityState === "visible" ? startPolling() : stopPolling()));
  if (typeof ResizeObserver === "function") {
    const ro = new ResizeObserver(() => drawCharts());
    for (const c of Object.values(charts)) ro.observe(c);
  }
  state.token = loadToken();
  state.operator = loadOperator();
  renderAuth();
  if (state.token) loadEvents();
  else {
    addEventOption("", "Sign in to see the shows");
    ui.event.disabled = true;
  }
}

init();
