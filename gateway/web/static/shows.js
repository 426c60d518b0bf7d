/*
 * shows.js: the box office's page (served at /admin/shows): the shows of
 * every status, a new show (one or many start times of a title on a venue's
 * layout), the venues' seat layouts (import a layout file, see its seat
 * map), and each show's history (the core's audit log).
 *
 * It uses the session the operator console (/admin/) signed in
 * (sessionStorage), and talks to the core's operators' API through the
 * gateway's operators' listener (/operator/v1/*). Every time an operator
 * types or reads is the venue's local time: the API takes local times in
 * the venue's zone. Closing a show asks first, naming it.
 *
 * No dependencies and nothing inline: the page runs under a strict CSP.
 * document.body.dataset.ready becomes "1" once shows and layouts are shown.
 */
"use strict";

const TOKEN_KEY = "onsale.admin";
const OPERATOR_KEY = "onsale.operator";
const ROLE_LABELS = { admin: "admin", box_office: "box office", sale_desk: "sale desk" };
const REQUEST_TIMEOUT_MS = 15000;

const $ = (id) => document.getElementById(id);
const state = { token: "", operator: null, layouts: [], shows: new Map(), next: "", editing: null, cancelling: null, progressTimer: 0 };

function setText(el, text) {
  if (el.textContent !== text) el.textContent = text;
}

function showMessage(text, kind = "info") {
  $("message").textContent = text;
  $("message").dataset.kind = kind;
}

/* ---------- API ---------- */

async function api(method, path, body, raw) {
  const headers = { Accept: "application/json", Authorization: `Bearer ${state.token}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), REQUEST_TIMEOUT_MS);
  let res;
  try {
    res = await fetch(path, { method, headers, cache: "no-store", credentials: "same-origin", signal: abort.signal,
      body: body === undefined ? undefined : raw ? body : JSON.stringify(body) });
  } catch {
    throw Object.assign(new Error(abort.signal.aborted ? "The server did not answer in time." : "The server could not be reached."), { status: 0 });
  } finally {
    clearTimeout(timer);
  }
  const data = await res.json().catch(() => null);
  if (!res.ok) {
    const err = new Error((data && data.message) || `The server answered ${res.status}.`);
    err.status = res.status;
    err.data = data || {};
    if (res.status === 401) signedOut("Your session was refused or has expired: sign in on the console again.");
    throw err;
  }
  return data;
}

/* ---------- times in the venue's zone ---------- */

// localParts is an RFC 3339 time as the venue's wall clock: "2026-12-20T18:30".
function venueLocal(iso, zone) {
  const ms = Date.parse(iso || "");
  if (Number.isNaN(ms)) return "";
  const parts = {};
  for (const p of new Intl.DateTimeFormat("en-GB", { timeZone: zone || undefined, hourCycle: "h23",
    year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit" }).formatToParts(ms)) {
    parts[p.type] = p.value;
  }
  return `${parts.year}-${parts.month}-${parts.day}T${parts.hour}:${parts.minute}`;
}

// venueTime is a readable start in the venue's zone: "Sat 20 Dec 2026, 18:30".
function venueTime(iso, zone) {
  const ms = Date.parse(iso || "");
  if (Number.isNaN(ms)) return "—";
  try {
    return new Intl.DateTimeFormat(undefined, { weekday: "short", day: "numeric", month: "short", year: "numeric",
      hour: "2-digit", minute: "2-digit", timeZone: zone || undefined }).format(ms);
  } catch {
    return new Date(ms).toISOString();
  }
}

const rupees = (paise) => (paise / 100).toLocaleString("en-IN", { minimumFractionDigits: paise % 100 ? 2 : 0 });

function showLabel(ev) {
  return `${ev.name} · ${venueTime(ev.starts_at, ev.venue && ev.venue.timezone)} · #${ev.id}`;
}

/* ---------- sign-in state ---------- */

function signedOut(message) {
  state.token = "";
  $("signed-out").hidden = false;
  $("signed-in").hidden = true;
  $("work").hidden = true;
  if (message) showMessage(message, "error");
}

// may mirrors the core's rules (core/operator.go) to show only the buttons
// an operator can use; the core refuses whatever this gets wrong.
function may(perm) {
  const role = state.operator && state.operator.role;
  return role === "admin" || (role === "box_office" && perm !== "operators") || (role === "sale_desk" && perm === "read");
}

/* ---------- shows ---------- */

async function loadShows(more) {
  const params = new URLSearchParams({ limit: "50" });
  const status = $("status-filter").value;
  if (status) params.set("status", status);
  if (more && state.next) params.set("cursor", state.next);
  const data = await api("GET", `/operator/v1/events?${params}`);
  if (!more) {
    $("shows").textContent = "";
    state.shows.clear();
  }
  for (const ev of data.events) {
    state.shows.set(String(ev.id), ev);
    $("shows").append(showRow(ev));
  }
  if (!state.shows.size) {
    const tr = document.createElement("tr");
    const td = document.createElement("td");
    td.colSpan = 6;
    td.textContent = status ? `No ${status} shows to come.` : "No shows to come yet: create one below.";
    tr.append(td);
    $("shows").append(tr);
  }
  state.next = data.next_cursor || "";
  $("shows-more").hidden = !state.next;
}

function cell(text, cls) {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  return td;
}

function button(text, cls, onClick, id) {
  const b = document.createElement("button");
  b.type = "button";
  if (id) b.id = id;
  b.textContent = text;
  if (cls) b.className = cls;
  b.addEventListener("click", onClick);
  return b;
}

function showRow(ev) {
  const zone = ev.venue && ev.venue.timezone;
  const tr = document.createElement("tr");
  tr.id = `show-${ev.id}`;
  const name = cell("");
  const strong = document.createElement("strong");
  strong.textContent = ev.name;
  name.append(strong, document.createElement("br"));
  const small = document.createElement("small");
  small.textContent = `#${ev.id} · ${ev.kind} · ${ev.capacity.toLocaleString()} ${ev.seated ? "seats" : "tickets"}`;
  name.append(small);
  tr.append(name, cell(ev.venue ? `${ev.venue.name}, ${ev.venue.city}` : ""), cell(venueTime(ev.starts_at, zone)),
    cell(venueTime(ev.onsale_at, zone)));
  const st = cell(ev.status, "status");
  st.dataset.status = ev.status;
  tr.append(st);
  const actions = document.createElement("td");
  actions.className = "actions";
  if (may("write")) {
    if (ev.status === "draft" || ev.status === "closed") actions.append(button("Publish", "", () => setStatus(ev, "publish"), `publish-${ev.id}`));
    if (ev.status === "published") actions.append(button("Close sale", "secondary", () => setStatus(ev, "close"), `close-${ev.id}`));
    if (ev.status === "draft" || ev.status === "published") actions.append(button("Edit", "secondary", () => openEdit(ev), `edit-${ev.id}`));
  }
  if (may("cancel") && ev.status !== "cancelled") actions.append(button("Cancel show", "danger", () => openCancel(ev), `cancel-${ev.id}`));
  if (ev.status === "cancelled") actions.append(button("Refunds", "secondary", () => watchCancellation(ev), `refunds-${ev.id}`));
  const live = document.createElement("a");
  live.href = `/admin/?event=${ev.id}`;
  live.textContent = "Live";
  if (may("sales")) actions.append(button("Sales", "secondary", () => showSales(ev), `sales-${ev.id}`));
  actions.append(live, button("History", "secondary", () => showHistory(ev), `history-${ev.id}`));
  tr.append(actions);
  return tr;
}

async function setStatus(ev, action) {
  if (action === "close" && !(await confirmAction("Close the sale?",
    `Close the sale of ${showLabel(ev)}? No more seats are sold; tickets sold stand. You can publish it again.`, "Close sale"))) {
    return;
  }
  try {
    const after = await api("POST", `/operator/v1/events/${ev.id}/${action}`);
    showMessage(`${showLabel(after)} is ${after.status}.`, "ok");
    await loadShows(false);
  } catch (err) {
    showMessage(`${showLabel(ev)}: ${err.message}`, "error");
  }
}

async function showHistory(ev) {
  try {
    const data = await api("GET", `/operator/v1/events/${ev.id}/audit`);
    const list = $("history");
    list.textContent = "";
    setText($("history-h"), `History of ${showLabel(ev)}`);
    for (const e of data.entries) {
      const li = document.createElement("li");
      const when = new Date(e.at).toLocaleString();
      li.textContent = `${when}: ${e.actor} — ${e.action}${describeChange(e)}`;
      list.append(li);
    }
    if (!data.entries.length) list.append(Object.assign(document.createElement("li"), { textContent: "No changes recorded." }));
    $("history-panel").hidden = false;
    $("history-panel").scrollIntoView({ behavior: "smooth", block: "start" });
  } catch (err) {
    showMessage(err.message, "error");
  }
}

// describeChange names the fields an audit entry changed.
function describeChange(e) {
  if (!e.before || !e.after || typeof e.before !== "object") return "";
  const changed = Object.keys(e.after).filter((k) => JSON.stringify(e.before[k]) !== JSON.stringify(e.after[k]));
  return changed.length ? ` (${changed.join(", ")})` : "";
}

/* ---------- sales ---------- */

async function showSales(ev) {
  state.salesShow = ev;
  try {
    const s = await api("GET", `/operator/v1/events/${ev.id}/sales`);
    const body = $("sales-rows");
    body.textContent = "";
    for (const b of [...s.bands, { ...s.total, name: "Total" }]) {
      const tr = document.createElement("tr");
      tr.append(cell(b.code ? `${b.name || b.code} (${b.code})` : "Total", b.code ? "" : "total"),
        cell(b.code ? `₹${rupees(b.price_paise)}` : ""), cell(b.capacity.toLocaleString()), cell(b.sold.toLocaleString()),
        cell(b.held.toLocaleString()), cell(b.available.toLocaleString()), cell(`₹${rupees(b.revenue_paise)}`),
        cell(`${b.refunded.toLocaleString()} (₹${rupees(b.refunded_paise)})`));
      body.append(tr);
    }
    setText($("sales-h"), `Sales of ${showLabel(ev)}`);
    setText($("sales-asof"), `As of ${new Date(s.as_of).toLocaleTimeString()}`);
    $("sales-panel").hidden = false;
    $("sales-panel").scrollIntoView({ behavior: "smooth", block: "start" });
  } catch (err) {
    showMessage(err.message, "error");
  }
}

// download fetches a CSV report (it needs the session's token, so it is
// no plain link) and saves it under the server's file name.
async function download(path, fallback) {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), REQUEST_TIMEOUT_MS);
  try {
    const res = await fetch(path, { headers: { Authorization: `Bearer ${state.token}` }, cache: "no-store", signal: abort.signal });
    if (!res.ok) {
      const data = await res.json().catch(() => null);
      throw new Error((data && data.message) || `The server answered ${res.status}.`);
    }
    const name = /filename="([^"]+)"/.exec(res.headers.get("Content-Disposition") || "");
    const url = URL.createObjectURL(await res.blob());
    const a = Object.assign(document.createElement("a"), { href: url, download: name ? name[1] : fallback });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  } catch (err) {
    showMessage(`Download failed: ${err.message}`, "error");
  } finally {
    clearTimeout(timer);
  }
}

/* ---------- cancel ---------- */

function openCancel(ev) {
  state.cancelling = ev;
  setText($("cancel-which"), `${showLabel(ev)} at ${ev.venue.name}, ${ev.venue.city}`);
  $("cancel-reason").value = "";
  $("cancel").returnValue = "";
  $("cancel").showModal();
  $("cancel-no").focus();
}

async function cancelShow() {
  const ev = state.cancelling;
  if (!ev || $("cancel").returnValue !== "yes") return;
  try {
    const reply = await api("POST", `/operator/v1/events/${ev.id}/cancel`, { reason: $("cancel-reason").value.trim() });
    showMessage(`${showLabel(ev)} is cancelled: ${reply.cancellation.bookings} booking(s) to refund.`, "ok");
    await loadShows(false);
    watchCancellation(ev);
  } catch (err) {
    showMessage(`${showLabel(ev)} not cancelled: ${err.message}`, "error");
  }
}

// watchCancellation shows a cancelled show's refunds and messages, polled
// every two seconds until every refund has settled at the provider.
async function watchCancellation(ev) {
  clearTimeout(state.progressTimer);
  $("progress-panel").hidden = false;
  setText($("progress-h"), `Cancellation of ${showLabel(ev)}`);
  let c;
  try {
    c = await api("GET", `/operator/v1/events/${ev.id}/cancellation`);
  } catch (err) {
    setText($("progress-line"), `Not updating: ${err.message}`);
    state.progressTimer = setTimeout(() => watchCancellation(ev), 5000);
    return;
  }
  const total = c.bookings, done = c.refunded;
  setText($("pg-bookings"), total.toLocaleString());
  setText($("pg-refunded"), `${done.toLocaleString()} (₹${rupees(c.refunded_paise)})`);
  setText($("pg-due"), `${c.refund_due.toLocaleString()} (₹${rupees(c.due_paise)})`);
  setText($("pg-notified"), `${c.notified.toLocaleString()} of ${(2 * total).toLocaleString()}`);
  setText($("pg-dead"), c.dead_jobs.toLocaleString());
  $("progress-bar").max = Math.max(1, total);
  $("progress-bar").value = total ? done : 1;
  const line = c.done
    ? `Done: all ${total.toLocaleString()} booking(s) refunded (₹${rupees(c.refunded_paise)}) and every holder told.`
    : `Refunding: ${done.toLocaleString()} of ${total.toLocaleString()} refunded so far` +
      (c.dead_jobs ? `; ${c.dead_jobs} job(s) gave up: see the runbook.` : ".");
  setText($("progress-line"), line);
  $("progress-panel").dataset.done = String(c.done);
  if (!c.done) state.progressTimer = setTimeout(() => watchCancellation(ev), 2000);
}

/* ---------- edit ---------- */

function pricesInto(fieldset, bands, prefix) {
  for (const el of fieldset.querySelectorAll(".field")) el.remove();
  for (const b of bands) {
    const f = document.createElement("div");
    f.className = "field";
    const label = document.createElement("label");
    label.htmlFor = `${prefix}-${b.code}`;
    label.textContent = `${b.name || b.code} (${b.code})`;
    const input = document.createElement("input");
    input.id = `${prefix}-${b.code}`;
    input.type = "number";
    input.min = "0";
    input.step = "0.01";
    input.required = true;
    input.dataset.band = b.code;
    input.value = String(b.price_paise / 100);
    f.append(label, input);
    fieldset.append(f);
  }
}

function pricesFrom(fieldset) {
  const prices = {};
  for (const input of fieldset.querySelectorAll("input[data-band]")) prices[input.dataset.band] = Math.round(Number(input.value) * 100);
  return prices;
}

function openEdit(ev) {
  const zone = ev.venue && ev.venue.timezone;
  state.editing = ev;
  setText($("edit-which"), `${showLabel(ev)} at ${ev.venue.name}, ${ev.venue.city} (times in ${zone})`);
  $("ed-title").value = ev.name;
  $("ed-starts").value = venueLocal(ev.starts_at, zone);
  $("ed-onsale").value = venueLocal(ev.onsale_at, zone);
  pricesInto($("ed-prices"), ev.price_bands, "ed");
  $("edit").showModal();
}

// roomTimes are the waiting room's dials an edit moves, as the room's
// defaults (gateway.DefaultDials) derive them: the pre-queue an hour before
// the sale, the line closing at the start; null when none moves.
function roomTimes(patch, after) {
  const d = {};
  if (patch.onsale_at) {
    d.onsale_at = after.onsale_at;
    d.prequeue_at = new Date(Date.parse(after.onsale_at) - 3600 * 1000).toISOString().replace(/\.\d{3}Z$/, "Z");
  }
  if (patch.starts_at) d.closes_at = after.starts_at;
  return Object.keys(d).length ? d : null;
}

async function saveEdit() {
  const ev = state.editing;
  if (!ev || $("edit").returnValue !== "save") return;
  const zone = ev.venue && ev.venue.timezone;
  const patch = {};
  if ($("ed-title").value.trim() !== ev.name) patch.title = $("ed-title").value.trim();
  if ($("ed-starts").value !== venueLocal(ev.starts_at, zone)) patch.starts_at = $("ed-starts").value;
  if ($("ed-onsale").value !== venueLocal(ev.onsale_at, zone)) patch.onsale_at = $("ed-onsale").value;
  const prices = pricesFrom($("ed-prices"));
  if (ev.price_bands.some((b) => prices[b.code] !== b.price_paise)) patch.prices = prices;
  if (!Object.keys(patch).length) {
    showMessage("Nothing changed.", "info");
    return;
  }
  try {
    const after = await api("PATCH", `/operator/v1/events/${ev.id}`, patch);
    const follow = roomTimes(patch, after);
    if (follow && after.status === "published") { // a draft has no waiting room yet
      // The waiting room keeps its own copy of the show's times (dials):
      // they follow the show's, as the room's defaults would have them.
      try {
        await api("PATCH", `/admin/v1/events/${ev.id}`, follow);
      } catch (err) {
        showMessage(`Saved ${showLabel(after)}, but the waiting room's on-sale time did not follow: ${err.message}. Set it in the live console.`, "error");
        await loadShows(false);
        return;
      }
    }
    showMessage(`Saved ${showLabel(after)}.`, "ok");
    await loadShows(false);
  } catch (err) {
    showMessage(`${showLabel(ev)} not changed: ${err.message}`, "error");
  }
}

/* ---------- new show ---------- */

function selectedLayout() {
  return state.layouts.find((l) => String(l.id) === $("ns-layout").value);
}

function layoutChanged() {
  const l = selectedLayout();
  pricesInto($("ns-prices"), l ? l.price_bands : [], "ns");
  setText($("ns-zone"), l ? `Times are ${l.venue.name}'s local time (${l.venue.timezone}).` : "");
}

async function createShow(event) {
  event.preventDefault();
  const l = selectedLayout();
  if (!l) {
    showMessage("Import a venue's layout first.", "error");
    return;
  }
  const starts = $("ns-starts").value.split("\n").map((s) => s.trim().replace(" ", "T")).filter(Boolean);
  const body = { title: $("ns-title").value.trim(), kind: $("ns-kind").value, layout_id: l.id, starts,
    onsale_at: $("ns-onsale").value, prices: pricesFrom($("ns-prices")),
    max_per_account: Number($("ns-max").value), hold_seconds: Number($("ns-hold").value) };
  $("ns-create").disabled = true;
  try {
    const data = await api("POST", "/operator/v1/events", body);
    showMessage(`Created ${data.events.length} draft show${data.events.length > 1 ? "s" : ""}: ` +
      data.events.map(showLabel).join("; ") + ". Publish each when it is ready.", "ok");
    $("new-show").reset();
    layoutChanged();
    await loadShows(false);
  } catch (err) {
    showMessage(`Not created: ${err.message}`, "error");
  } finally {
    $("ns-create").disabled = false;
  }
}

/* ---------- layouts ---------- */

async function loadLayouts() {
  const data = await api("GET", "/operator/v1/layouts");
  state.layouts = data.layouts;
  const list = $("layouts");
  list.textContent = "";
  const keep = $("ns-layout").value;
  $("ns-layout").textContent = "";
  for (const l of data.layouts) {
    const li = document.createElement("li");
    const bands = l.price_bands.map((b) => `${b.name || b.code} ₹${rupees(b.price_paise)}`).join(", ");
    li.textContent = `${l.venue.name}, ${l.venue.city} (${l.venue.timezone}) — layout “${l.name}”: ` +
      `${l.capacity.toLocaleString()} ${l.seated ? "seats" : "tickets (general admission)"}; ${bands}. `;
    if (l.seated) li.append(button("Seat map", "secondary", () => showSeatMap(l)));
    list.append(li);
    const opt = document.createElement("option");
    opt.value = String(l.id);
    opt.textContent = `${l.venue.name}, ${l.venue.city} — ${l.name} (${l.capacity.toLocaleString()})`;
    $("ns-layout").append(opt);
  }
  if (!data.layouts.length) {
    list.append(Object.assign(document.createElement("li"), { textContent: "No layouts yet: import one below." }));
    $("ns-layout").append(Object.assign(document.createElement("option"), { value: "", textContent: "Import a layout first" }));
  }
  if (keep && [...$("ns-layout").options].some((o) => o.value === keep)) $("ns-layout").value = keep;
  layoutChanged();
}

async function importLayout(event) {
  event.preventDefault();
  const file = $("import-file").files[0];
  if (!file) return;
  const problems = $("problems");
  problems.hidden = true;
  problems.textContent = "";
  try {
    const text = await file.text();
    const l = await api("POST", `/operator/v1/layouts?name=${encodeURIComponent($("import-name").value.trim())}`, text, true);
    showMessage(`Imported ${l.venue.name}, ${l.venue.city}: layout “${l.name}”, ${l.capacity.toLocaleString()} places.`, "ok");
    $("import").reset();
    await loadLayouts();
  } catch (err) {
    showMessage(`${file.name} was not imported: ${err.message}`, "error");
    for (const p of (err.data && err.data.problems) || []) {
      problems.append(Object.assign(document.createElement("li"), { textContent: `${p.path}: ${p.message}` }));
    }
    problems.hidden = !problems.childElementCount;
  }
}

// showSeatMap draws a layout's rows as seen from the stage: one square per
// seat, coloured by band, each row labelled.
async function showSeatMap(l) {
  try {
    const data = await api("GET", `/operator/v1/layouts/${l.id}`);
    const doc = data.document;
    const bands = doc.bands.map((b) => b.code);
    const body = $("seatmap-body");
    body.textContent = "";
    for (const sec of doc.sections) {
      const block = document.createElement("div");
      block.className = "sm-section";
      block.append(Object.assign(document.createElement("h3"), { textContent: `${sec.name || sec.code} (${sec.code})` }));
      for (const row of sec.rows) {
        const r = document.createElement("div");
        r.className = "sm-row";
        r.append(Object.assign(document.createElement("span"), { className: "sm-label", textContent: row.label }));
        const band = row.band || sec.band;
        const n = row.numbers && row.numbers.length ? row.numbers.length : row.to - row.from + 1;
        const seats = document.createElement("span");
        seats.className = "sm-seats";
        seats.dataset.band = String(bands.indexOf(band) % 6);
        seats.style.setProperty("--n", String(n));
        seats.title = `Row ${row.label}: ${n} seats, ${band}`;
        r.append(seats);
        block.append(r);
      }
      body.append(block);
    }
    setText($("seatmap-caption"), `${l.venue.name}, ${l.venue.city} — “${l.name}”: ${l.capacity.toLocaleString()} seats; ` +
      doc.bands.map((b, i) => `${b.name || b.code} (colour ${i + 1})`).join(", "));
    $("seatmap").hidden = false;
  } catch (err) {
    showMessage(err.message, "error");
  }
}

/* ---------- confirmation ---------- */

function confirmAction(title, text, yes) {
  const d = $("confirm");
  if (typeof d.showModal !== "function") return Promise.resolve(window.confirm(`${title}\n\n${text}`));
  setText($("confirm-title"), title);
  setText($("confirm-text"), text);
  setText($("confirm-yes"), yes);
  return new Promise((resolve) => {
    d.addEventListener("close", () => resolve(d.returnValue === "yes"), { once: true });
    d.returnValue = "";
    d.showModal();
    $("confirm-no").focus();
  });
}

/* ---------- start ---------- */

async function init() {
  try {
    state.token = sessionStorage.getItem(TOKEN_KEY) || "";
    state.operator = JSON.parse(sessionStorage.getItem(OPERATOR_KEY) || "null");
  } catch { /* storage off: signed out */ }
  $("status-filter").addEventListener("change", () => loadShows(false).catch((e) => showMessage(e.message, "error")));
  $("shows-next").addEventListener("click", () => loadShows(true).catch((e) => showMessage(e.message, "error")));
  $("ns-layout").addEventListener("change", layoutChanged);
  $("new-show").addEventListener("submit", createShow);
  $("import").addEventListener("submit", importLayout);
  $("edit").addEventListener("close", saveEdit);
  $("cancel").addEventListener("close", cancelShow);
  $("sales-csv").addEventListener("click", () => state.salesShow &&
    download(`/operator/v1/events/${state.salesShow.id}/sales?format=csv`, "sales.csv"));
  $("attendees-csv").addEventListener("click", () => state.salesShow &&
    download(`/operator/v1/events/${state.salesShow.id}/attendees?format=csv`, "attendees.csv"));
  if (!state.token) {
    signedOut("");
    return;
  }
  $("signed-out").hidden = true;
  $("signed-in").hidden = false;
  const op = state.operator || {};
  setText($("signed-in-as"), op.display_name || op.name || "an operator");
  setText($("signed-in-role"), op.role ? `(${ROLE_LABELS[op.role] || op.role})` : "");
  $("work").hidden = false;
  $("new-show-panel").hidden = !may("write");
  $("import").hidden = !may("write");
  try {
    await Promise.all([loadShows(false), loadLayouts()]);
    document.body.dataset.ready = "1";
  } catch (err) {
    if (err.status !== 401) showMessage(err.message, "error");
  }
}

init();
