// The gate scanner: a steward's phone reads ticket QR codes with its camera
// and asks the core (through the gateway, /v1/gate/*) to redeem each one,
// once. When the network is down it checks what it can alone: the ticket's
// Ed25519 signature (WebCrypto), today's events at this venue, the revoked
// and used lists it last fetched, and its own scans; it keeps those scans
// and sends them when the network is back, and shows the duplicates the
// core finds then. Offline cannot be exactly once: two offline scanners can
// each admit a copy of one ticket; the sync tells, after the fact.
import decodeQR from "/static/qr-decode.js";

const KEY = { token: "onsale.gate.token" };
// k names a signed-in steward's storage: pack, pending and seen are kept per
// venue, gate and staff name, so that another steward's token never sends
// (nor reads) them.
const k = (what, st = state.staff) => `onsale.gate.${st.venue}.${st.gate}.${st.name}.${what}`;
const SCAN_EVERY_MS = 150;     // camera frames tried per second: about 6
const GONE_FRAMES = 3;         // a code counts as gone after this many frames without it
const GONE_MS = 1000;          // and at least this long
const RESULT_MS = 4000;        // then the answer fades: ready for the next ticket
const PACK_EVERY_MS = 60000;   // offline pack refresh while online
const PROBE_EVERY_MS = 5000;   // offline: how often to try the network again
const SYNC_BATCH = 50;         // scans per sync request
const SCAN_ABORT_MS = 5000;    // a scan's answer must come quickly, or the scanner goes offline
const SYNC_ABORT_MS = 20000;   // a sync batch redeems up to SYNC_BATCH tickets: give it longer
const DOMAIN = new TextEncoder().encode("onsale ticket v2\0");

const $ = (id) => document.getElementById(id);
const state = { token: "", staff: null, online: true, pack: null, key: null, busy: false, last: "", lastAt: 0, missed: 0, fade: 0, syncing: false };
window.gate = state; // for the browser tests and for support: what the scanner believes
state.storageKey = (what) => k(what);

// ---- storage ---------------------------------------------------------
function load(k, d) { try { const v = JSON.parse(localStorage.getItem(k)); return v ?? d; } catch { return d; } }
// save persists v; a full or refused storage never loses the answer on
// screen nor sticks the scanner: it is logged, said once, and false.
function save(k, v) {
  try {
    localStorage.setItem(k, JSON.stringify(v));
    return true;
  } catch (e) {
    console.warn("gate: cannot store " + k, e);
    const note = $("storage");
    if (note) note.textContent = "This phone's storage is full or blocked: offline scans may not survive a reload. Sync, then sign out and in again.";
    return false;
  }
}
function storedToken() { try { return localStorage.getItem(KEY.token) || ""; } catch { return ""; } }
function drop(k) { try { localStorage.removeItem(k); } catch { /* nothing to keep */ } }

// ---- the staff token ---------------------------------------------------
function claimsOf(token) {
  try {
    const part = token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    return JSON.parse(atob(part + "=".repeat((4 - part.length % 4) % 4)));
  } catch { return null; }
}

function useToken(raw) {
  let token = (raw || "").trim();
  if (token.includes("#")) token = token.slice(token.indexOf("#") + 1);
  try { token = decodeURIComponent(token); } catch { return "That is not a staff token."; }
  const c = claimsOf(token);
  if (!c || !String(c.sub || "").startsWith("staff:") || !c.gate || !c.venue) return "That is not a staff token.";
  if (c.exp && c.exp * 1000 < Date.now()) return "That staff token has expired: ask for a new one.";
  state.token = token;
  state.staff = { name: c.sub.slice(6), gate: c.gate, venue: c.venue, exp: c.exp };
  try { localStorage.setItem(KEY.token, token); } catch { /* signed in for this page's life */ }
  return "";
}

// signOut forgets the token, the camera and this steward's own-admits
// list; pending scans stay under the steward's key (sent when that
// steward signs in here again: never with another token), and so does
// the own-admits list while any are pending (the offline check of a
// ticket this phone let in reads it).
function signOut(message) {
  drop(KEY.token);
  const left = state.staff ? load(k("pending"), []).length : 0;
  if (state.staff && !left) drop(k("seen"));
  if (left) message = (message ? message + " " : "") +
    `${left} offline scan${left === 1 ? "" : "s"} of ${state.staff.name} at gate ${state.staff.gate} stay on this phone: sign in again as ${state.staff.name} to send them.`;
  state.token = "";
  state.staff = null;
  state.pack = null;
  state.key = null;
  clearInterval(state.packTimer);
  clearInterval(state.probeTimer);
  stopCamera();
  $("scanner").hidden = true;
  $("signin").hidden = false;
  $("signin-error").textContent = message || "";
  $("who").textContent = "Gate scanner";
}

// ---- talking to the core -------------------------------------------------
class Offline extends Error {}

async function api(method, path, body, abortMs = SCAN_ABORT_MS, token = state.token) {
  let resp;
  try {
    resp = await fetch(path, {
      method, cache: "no-store",
      headers: { "Authorization": "Bearer " + token, ...(body ? { "Content-Type": "application/json" } : {}) },
      body: body ? JSON.stringify(body) : undefined,
      signal: AbortSignal.timeout(abortMs),
    });
  } catch (e) {
    throw new Offline(String(e));
  }
  if (resp.status === 502 || resp.status === 503 || resp.status === 504) throw new Offline("HTTP " + resp.status);
  setOnline(true); // the core answered: online from this answer on
  let data = {};
  try { data = await resp.json(); } catch { /* an empty or non-JSON answer */ }
  if (resp.status === 401) {
    // Only the current steward's refusal signs out: a sync sent with a
    // previous token must not sign out the one now at the gate.
    if (token === state.token) signOut(data.message || "The staff token was refused.");
    throw new Error("unauthorized");
  }
  return { status: resp.status, data };
}

function setOnline(online) {
  if (state.online === online) return;
  state.online = online;
  const net = $("net");
  net.textContent = online ? "ONLINE" : "OFFLINE";
  net.className = "net " + (online ? "online" : "offline");
  $("offline-banner").hidden = online;
  if (online) { refreshPack(); sync(); }
}

// compactPack keeps what the offline checks need: the used tickets as
// ref -> [gate, at, event], the revoked as refs.
function compactPack(d, used) {
  for (const u of d.used || []) used[u.ticket] = [u.gate, u.at, u.event_id];
  const events = new Set(d.events.map((e) => e.id));
  for (const ref of Object.keys(used)) if (!events.has(used[ref][2])) delete used[ref];
  return { venue: d.venue, events: d.events, public_key: d.public_key, revoked: d.revoked, used, as_of: d.as_of };
}

const sameEvents = (a, b) => a.length === b.length && a.every((e, i) => e.id === b[i].id);

// refreshPack fetches the offline pack: in full the first time and when
// the day's events change, else only the check-ins since the last one
// (?since=as_of): a stadium's used list is not fetched every minute.
async function refreshPack() {
  if (state.packing || !state.token) return;
  state.packing = true;
  try {
    const old = state.pack;
    let { status, data } = await api("GET", "/v1/gate/offline" + (old ? "?since=" + encodeURIComponent(old.as_of) : ""));
    if (status === 200 && old && !sameEvents(old.events, data.events)) ({ status, data } = await api("GET", "/v1/gate/offline"));
    if (status !== 200) return;
    const p = compactPack(data, data.since && old ? { ...old.used } : {});
    await usePack(p);
    if (state.staff) save(k("pack"), p);
  } catch (e) {
    if (e instanceof Offline) setOnline(false);
  } finally {
    state.packing = false;
  }
}

async function usePack(p) {
  if (!p || !p.venue || !Array.isArray(p.events) || !p.used || Array.isArray(p.used)) return; // an old or foreign shape: fetch anew
  if (!state.staff || p.venue.id !== state.staff.venue) return; // another venue's: never checked against
  p.revokedSet = new Set(p.revoked);
  state.pack = p;
  state.key = null;
  try {
    const raw = Uint8Array.from(atob(p.public_key), (c) => c.charCodeAt(0));
    state.key = await crypto.subtle.importKey("raw", raw, { name: "Ed25519" }, false, ["verify"]);
  } catch (e) {
    console.warn("this browser cannot verify Ed25519 signatures offline", e);
  }
  const when = fmtTime(p.as_of);
  $("pack").textContent = `Offline data: ${p.events.length} event${p.events.length === 1 ? "" : "s"} today at ${p.venue.name}, ` +
    `${p.revoked.length} revoked and ${Object.keys(p.used).length} used tickets, as of ${when}.` + (state.key ? "" : " This browser cannot check signatures offline.");
}

// fmtTime tells a time as the venue's clocks show it (HH:MM, or HH:MM:SS).
function fmtTime(when, seconds) {
  const tz = state.pack?.venue?.timezone;
  const opts = { hour: "2-digit", minute: "2-digit", hour12: false, ...(seconds ? { second: "2-digit" } : {}) };
  try {
    return new Intl.DateTimeFormat("en-GB", { ...opts, ...(tz ? { timeZone: tz } : {}) }).format(new Date(when));
  } catch { return new Date(when).toTimeString().slice(0, seconds ? 8 : 5); }
}

// ---- answers ------------------------------------------------------------
function show(kind, title, detail, ref) {
  clearTimeout(state.fade);
  const r = $("result");
  r.className = "result " + kind;
  $("result-title").textContent = title;
  $("result-detail").textContent = detail || "";
  $("result-last").textContent = "";
  if (kind === "admitted" || kind === "refused" || kind === "warn") {
    const li = document.createElement("li");
    li.className = kind;
    li.dataset.result = title;
    li.dataset.ticket = ref || "";
    li.textContent = `${fmtTime(new Date(), true)}  ${title}${ref ? " · " + ref : ""}${detail ? " · " + detail : ""}`;
    $("log").prepend(li);
    while ($("log").children.length > 12) $("log").lastChild.remove();
    if (kind !== "admitted" && navigator.vibrate) navigator.vibrate([120, 80, 120]);
    // Then back to ready, so that an old green is never read as the
    // next person's answer.
    state.fade = setTimeout(() => {
      r.className = "result idle";
      $("result-title").textContent = "READY";
      $("result-detail").textContent = "Point the camera at the next ticket";
      $("result-last").textContent = `Last: ${title}${ref ? " · " + ref : ""}`;
    }, RESULT_MS);
  }
}

function answerOnline(status, d, ref) {
  switch (status === 200 ? "admitted" : d.error) {
    case "admitted":
      show("admitted", "ADMITTED", [d.seat ? "Seat " + d.seat : "", d.event_name].filter(Boolean).join(" · "), d.ticket);
      return remember(d.ticket, d.gate, d.at, d.event_id);
    case "already_used":
      return show("refused", "ALREADY USED", `at gate ${d.gate} at ${fmtTime(d.at)}`, d.ticket);
    case "ticket_revoked":
      return show("refused", "REVOKED", "Booking cancelled or refunded", d.ticket || ref);
    case "wrong_venue":
      return show("refused", "WRONG VENUE", "This ticket is for another venue", d.ticket || ref);
    case "wrong_event":
      return show("refused", "WRONG DAY", d.message || "This ticket is for another show at this venue", d.ticket || ref);
    case "ticket_invalid":
      return show("refused", "NOT VALID", "Not an onsale ticket", ref);
    default:
      return show("warn", "TRY AGAIN", d.message || "The check failed (" + status + ")", ref);
  }
}

// ---- offline checks -----------------------------------------------------
const B32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
// base32 decodes RFC 4648 base32 without padding, strictly: a length no
// encoder makes (1, 3 or 6 characters past a multiple of 8) or non-zero
// bits past the last byte is not a ticket.
function base32(s) {
  if ([1, 3, 6].includes(s.length % 8)) return null;
  const out = [];
  let bits = 0, val = 0;
  for (const ch of s) {
    const i = B32.indexOf(ch);
    if (i < 0) return null;
    val = ((val << 5) | i) & 0xffff;
    bits += 5;
    if (bits >= 8) { out.push((val >>> (bits - 8)) & 0xff); bits -= 8; }
  }
  if (val & ((1 << bits) - 1)) return null;
  return new Uint8Array(out);
}

// uvarints reads n unsigned varints filling bytes exactly, or null.
function uvarints(bytes, n) {
  const vals = [];
  let i = 0;
  for (let k = 0; k < n; k++) {
    let v = 0, mul = 1, done = false;
    while (i < bytes.length && mul < 2 ** 56) {
      const b = bytes[i++];
      v += (b & 0x7f) * mul;
      mul *= 128;
      if (!(b & 0x80)) { done = true; break; }
    }
    if (!done || v === 0 || v > 2 ** 53) return null;
    vals.push(v);
  }
  return i === bytes.length ? vals : null;
}

// parseTicket reads a v2 payload: {event, booking, n, ref, claims, sig},
// {old: true} for an old "t1." (JSON) ticket, or null.
function parseTicket(text) {
  if (text.trim().startsWith("t1.")) return { old: true };
  const t = text.trim().toUpperCase();
  if (!t.startsWith("T2.")) return null;
  const raw = base32(t.slice(3));
  if (!raw || raw.length <= 64) return null;
  const claims = raw.slice(0, raw.length - 64), sig = raw.slice(raw.length - 64);
  const v = uvarints(claims, 3);
  if (!v) return null;
  return { event: v[0], booking: v[1], n: v[2], ref: `${v[1]}-${v[2]}`, claims, sig };
}

// seen is this phone's own admits, ref -> [gate, at, event], for the
// offline checks; kept to the pack's events, cleared at sign-out.
function seen() { return load(k("seen"), {}); }
function remember(ref, gate, at, event) {
  const s = seen();
  s[ref] = [gate, at, event];
  if (state.pack) {
    const events = new Set(state.pack.events.map((e) => e.id));
    for (const r of Object.keys(s)) if (!events.has(s[r][2])) delete s[r];
  }
  save(k("seen"), s);
}

// scanID makes a UUID (v4) for one look at a ticket: getRandomValues also
// works where randomUUID does not (a page not served over https).
function scanID() {
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

async function checkOffline(text, id) {
  const tk = parseTicket(text);
  if (!tk) return show("refused", "NOT VALID", "Not an onsale ticket (offline check)");
  // An old-format ticket is checked by the core only: not refused here.
  if (tk.old) return show("warn", "OLD TICKET", "Old ticket: check online (send the guest to the help desk while offline)");
  if (!state.pack || !state.key) return show("warn", "CANNOT CHECK", "Offline with no offline data: connect once to load it", tk.ref);
  const msg = new Uint8Array(DOMAIN.length + tk.claims.length);
  msg.set(DOMAIN);
  msg.set(tk.claims, DOMAIN.length);
  let ok = false;
  try { ok = await crypto.subtle.verify({ name: "Ed25519" }, state.key, tk.sig, msg); } catch { ok = false; }
  if (!ok) return show("refused", "NOT VALID", "Forged or damaged code (offline check)", tk.ref);
  if (!state.staff || !state.pack) return; // signed out while checking
  if (!state.pack.events.some((e) => e.id === tk.event)) return show("refused", "NOT VALID", "Not for today's events at this venue", tk.ref);
  if (state.pack.revokedSet.has(tk.ref)) return show("refused", "REVOKED", "Booking cancelled or refunded (offline list)", tk.ref);
  const used = state.pack.used[tk.ref];
  if (used) return show("refused", "ALREADY USED", `at gate ${used[0]} at ${fmtTime(used[1])}`, tk.ref);
  const mine = seen()[tk.ref];
  if (mine) return show("refused", "ALREADY USED", `at gate ${mine[0]} at ${fmtTime(mine[1])} (this phone)`, tk.ref);
  const at = new Date().toISOString();
  // The answer first: storage can fail, the steward's answer cannot.
  show("admitted", "ADMITTED", "Offline check: signature valid · will sync", tk.ref);
  const pending = load(k("pending"), []);
  pending.push({ ticket: text.trim(), at, scan_id: id });
  save(k("pending"), pending);
  remember(tk.ref, state.staff.gate, at, tk.event);
  showPending();
}

// ---- sync -----------------------------------------------------------------
function showPending() {
  const n = state.staff ? load(k("pending"), []).length : 0;
  $("pending").textContent = n ? `${n} offline scan${n === 1 ? "" : "s"} waiting to be sent.` : "";
}

async function sync() {
  if (state.syncing || !state.online || !state.staff) return;
  state.syncing = true;
  // This steward's scans with this steward's token, even if another signs
  // in while a batch is on its way.
  const key = k("pending"), token = state.token;
  const report = { admitted: 0, duplicates: [], refused: [] };
  try {
    for (let pending = load(key, []); pending.length && state.token === token; pending = load(key, [])) {
      const batch = pending.slice(0, SYNC_BATCH);
      const { status, data } = await api("POST", "/v1/gate/sync", { scans: batch }, SYNC_ABORT_MS, token);
      if (status !== 200) break;
      save(key, load(key, []).slice(batch.length));
      for (const r of data.results) {
        if (r.result === "admitted") report.admitted++;
        else if (r.result === "duplicate") report.duplicates.push(r);
        else report.refused.push(r);
      }
    }
  } catch (e) {
    if (e instanceof Offline) setOnline(false);
  } finally {
    state.syncing = false;
  }
  showPending();
  const total = report.admitted + report.duplicates.length + report.refused.length;
  if (!total) return;
  state.lastSync = report;
  const box = $("sync");
  box.hidden = false;
  box.className = "card sync" + (report.duplicates.length || report.refused.length ? "" : " clean");
  $("sync-text").textContent = `Back online: sent ${total} offline scan${total === 1 ? "" : "s"}. ` +
    `${report.admitted} first entr${report.admitted === 1 ? "y" : "ies"}, ${report.duplicates.length} duplicate${report.duplicates.length === 1 ? "" : "s"}` +
    (report.refused.length ? `, ${report.refused.length} refused` : "") + ".";
  const ul = $("sync-duplicates");
  ul.textContent = "";
  for (const r of report.duplicates) {
    const li = document.createElement("li");
    li.textContent = `Ticket ${r.ticket} was let in twice: first at gate ${r.gate} at ${fmtTime(r.at)}`;
    ul.append(li);
  }
  for (const r of report.refused) {
    const li = document.createElement("li");
    li.textContent = `Ticket ${r.ticket || "(unreadable)"}: ${r.result}${r.message ? " — " + r.message : ""}`;
    ul.append(li);
  }
}

// ---- one scan ---------------------------------------------------------------
async function handle(text) {
  if (state.busy) return;
  state.busy = true;
  try {
    const ref = parseTicket(text)?.ref;
    // One id for this look, online and offline: if the online answer is
    // lost after the core committed, the sync of the offline scan is
    // recognised as the same scan, not as a duplicate.
    const id = scanID();
    if (state.online) {
      show("checking", "CHECKING…", "", ref);
      try {
        const { status, data } = await api("POST", "/v1/gate/scan", { ticket: text.trim(), scan_id: id });
        return answerOnline(status, data, ref);
      } catch (e) {
        if (!(e instanceof Offline)) return;
        setOnline(false);
      }
    }
    await checkOffline(text, id);
  } finally {
    state.busy = false;
  }
}

// onCode is called with every code the camera reads: a code that stays in
// view is handled once, and again only after it has been out of view
// (GONE_FRAMES frames read without it, over at least GONE_MS): a slow
// phone that reads a frame a second must not answer twice for one look.
function onCode(text) {
  const now = Date.now();
  const gone = state.missed >= GONE_FRAMES && now - state.lastAt >= GONE_MS;
  if (text === state.last && !gone) { state.lastAt = now; state.missed = 0; return; }
  if (state.busy) return;
  state.last = text;
  state.lastAt = now;
  state.missed = 0;
  handle(text);
}

// ---- the camera -----------------------------------------------------------
let stream = null, timer = 0, detector = null;
const canvas = document.createElement("canvas");
const c2d = canvas.getContext("2d", { willReadFrequently: true });

async function startCamera() {
  const status = $("camera-status");
  if (!navigator.mediaDevices?.getUserMedia) {
    status.textContent = "No camera access here (the page needs https). Type or paste codes below.";
    return;
  }
  try {
    stream = await navigator.mediaDevices.getUserMedia({ audio: false, video: { facingMode: { ideal: "environment" }, width: { ideal: 1280 }, height: { ideal: 720 } } });
  } catch (e) {
    status.textContent = `Camera unavailable (${e.name}). Allow the camera, or type or paste codes below.`;
    return;
  }
  const video = $("video");
  video.srcObject = stream;
  await video.play().catch(() => {});
  status.textContent = "";
  if ("BarcodeDetector" in window) {
    try {
      if ((await BarcodeDetector.getSupportedFormats()).includes("qr_code")) detector = new BarcodeDetector({ formats: ["qr_code"] });
    } catch { detector = null; }
  }
  const tick = async () => {
    let text = "";
    try { text = await readFrame(video); } catch { /* no code in this frame */ }
    if (text) onCode(text);
    else if (video.readyState >= 2) state.missed++;
    if (stream) timer = setTimeout(tick, SCAN_EVERY_MS);
  };
  tick();
}

// readFrame returns the QR text in the video's current frame, or "".
async function readFrame(video) {
  if (video.readyState < 2 || !video.videoWidth) return "";
  if (detector) {
    const codes = await detector.detect(video);
    return codes.length ? codes[0].rawValue : "";
  }
  const scale = Math.min(1, 800 / Math.max(video.videoWidth, video.videoHeight));
  const w = Math.round(video.videoWidth * scale), h = Math.round(video.videoHeight * scale);
  if (canvas.width !== w || canvas.height !== h) { canvas.width = w; canvas.height = h; }
  c2d.drawImage(video, 0, 0, w, h);
  return decodeQR(c2d.getImageData(0, 0, w, h)) || "";
}

function stopCamera() {
  clearTimeout(timer);
  if (stream) stream.getTracks().forEach((t) => t.stop());
  stream = null;
}

// ---- start ------------------------------------------------------------------
async function start() {
  $("who").textContent = `Gate ${state.staff.gate} · ${state.staff.name}`;
  $("signin").hidden = true;
  $("scanner").hidden = false;
  const cached = load(k("pack"), null);
  if (cached) await usePack(cached).catch(() => {});
  showPending();
  await refreshPack();
  if (state.pack?.venue) $("who").textContent = `Gate ${state.staff.gate} · ${state.pack.venue.name} · ${state.staff.name}`;
  startCamera();
  state.packTimer = setInterval(() => { if (state.online) refreshPack(); }, PACK_EVERY_MS);
  state.probeTimer = setInterval(() => { if (!state.online) refreshPack(); else if (load(k("pending"), []).length) sync(); }, PROBE_EVERY_MS);
  if (navigator.onLine === false) setOnline(false);
  else sync();
}

// The service worker keeps this page and its assets for a reload with the
// network down (it never touches the API).
if ("serviceWorker" in navigator) {
  navigator.serviceWorker.register("/gate-sw.js", { scope: "/gate" }).catch((e) => console.warn("gate: no offline reload", e));
}

$("signin-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const err = useToken($("token").value);
  $("signin-error").textContent = err;
  if (!err) start();
});
$("manual").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const v = $("manual-code").value.trim();
  if (v) { state.last = v; state.lastAt = Date.now(); handle(v); $("manual-code").value = ""; }
});
// Sign-out sends this steward's offline scans first when it can.
$("signout").addEventListener("click", async () => {
  if (state.staff && load(k("pending"), []).length && state.online) await sync();
  signOut("");
});
window.addEventListener("online", () => { if (state.token) refreshPack(); });
window.addEventListener("offline", () => { if (state.token) setOnline(false); });
$("sync-dismiss").addEventListener("click", () => { $("sync").hidden = true; });

{
  // A link /gate#<token> fills the token in; the fragment is then dropped
  // from the address bar (it never reached a server).
  let err = "";
  if (location.hash.length > 1) {
    err = useToken(location.hash.slice(1));
    history.replaceState(null, "", location.pathname);
  } else if (storedToken()) {
    err = useToken(storedToken());
  } else {
    err = "-";
  }
  if (err) {
    $("signin").hidden = false;
    $("signin-error").textContent = err === "-" ? "" : err;
  } else {
    start();
  }
}
