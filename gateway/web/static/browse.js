/*
 * browse.js: the fans' catalog (served at /browse): pick a city, then a
 * title, then a show by its date and time (the venue's), which opens the
 * show's waiting room. It reads GET /v1/events a page at a time (limit and
 * next_cursor), filtered by city, kind and date; the cities offered are
 * those of the shows read so far.
 */
"use strict";

const { el, api, when, venueLine, rupees } = onsale;
const $ = (id) => document.getElementById(id);
const state = { cursor: "", shows: [], cities: new Set(), loading: false };

function status(t) { $("status").textContent = t || ""; }
function message(t) { $("message").textContent = t || ""; }

// query is the filters as the catalog's parameters.
function query(cursor) {
  const q = new URLSearchParams({ limit: "50" });
  for (const id of ["city", "kind", "date"]) if ($(id).value) q.set(id, $(id).value);
  if (cursor) q.set("cursor", cursor);
  return q.toString();
}

async function load(more) {
  if (state.loading) return;
  state.loading = true;
  if (!more) {
    state.cursor = "";
    state.shows = [];
  }
  status("Loading shows…");
  message("");
  let r;
  try {
    r = await api("GET", "/v1/events?" + query(more ? state.cursor : ""));
  } catch (e) {
    state.loading = false;
    status("");
    message("No connection. Check your network and try again.");
    return;
  }
  state.loading = false;
  status("");
  if (r.status !== 200) {
    message(r.body.message || "We could not load the shows just now; try again in a moment.");
    return;
  }
  state.shows.push(...(r.body.events || []));
  state.cursor = r.body.next_cursor || "";
  for (const ev of r.body.events || []) if (ev.venue && ev.venue.city) state.cities.add(ev.venue.city);
  renderCities();
  render();
}

function renderCities() {
  const sel = $("city"), keep = sel.value;
  const have = new Set([...sel.options].map((o) => o.value));
  for (const c of [...state.cities].sort()) {
    if (!have.has(c)) sel.append(el("option", { value: c, text: c }));
  }
  sel.value = keep;
}

// render groups the shows by title (and venue): each title lists its shows
// by date and time, each a link to its waiting room.
function render() {
  const box = $("titles");
  box.textContent = "";
  const groups = new Map();
  for (const ev of state.shows) {
    const key = `${ev.name}\u0000${ev.venue ? ev.venue.id : ""}`;
    if (!groups.has(key)) groups.set(key, []);
    groups.get(key).push(ev);
  }
  for (const shows of groups.values()) {
    const first = shows[0];
    const prices = (first.price_bands || []).map((b) => b.price_paise);
    const from = prices.length ? `from ${rupees(Math.min(...prices))}` : "";
    const list = el("ul", { class: "shows" });
    for (const ev of shows) {
      const closed = ev.status === "closed";
      const label = when(ev.starts_at, ev.venue && ev.venue.timezone);
      list.append(el("li", {},
        closed ? el("span", { class: "muted", text: `${label} · sales closed` })
          : el("a", { href: `/events/${ev.id}`, class: "show-link", text: label, "aria-label": `${ev.name}, ${label}: open its waiting room` })));
    }
    box.append(el("section", { class: "card title" },
      el("h2", { text: first.name }),
      el("p", { class: "muted", text: [venueLine(first.venue), first.kind === "movie" ? "Film" : "Concert", from].filter(Boolean).join(" · ") }),
      list));
  }
  if (!state.shows.length) status("No shows to come match these filters.");
  $("more").hidden = !state.cursor;
  document.body.dataset.ready = "1";
  document.body.dataset.shows = String(state.shows.length);
}

for (const id of ["city", "kind", "date"]) $(id).addEventListener("change", () => load(false));
$("filters").addEventListener("submit", (e) => { e.preventDefault(); load(false); });
$("more").addEventListener("click", () => load(true));
load(false);
