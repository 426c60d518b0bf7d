// Booking page: the seat map (layout from the gateway, availability bitmap
// at most a second old) with prices per row and block, a legend and the
// screen or stage; best-available or hand-picked seats with the total before
// Hold; the hold with its countdown and total; Pay (the hold is extended
// once), the provider's checkout, then the tickets.
//
// Who may do what: the admit token (the waiting-room session) only takes
// new seats. Everything about a hold the fan already has (pay, retry,
// release, read the booking and its QR codes) uses the hold's own grant
// (hold_token) or the account token, so it keeps working after the session
// ends. Each payment attempt has its own Idempotency-Key, one per (hold,
// attempt): a declined payment starts a new attempt; a new hold new keys.
// State lives in localStorage per event and person (account or guest), so
// a reload, a new tab or the return from the checkout resumes.
"use strict";

const eventId = location.pathname.split("/")[2];
const $ = (id) => document.getElementById(id);
const { api, el, rupees } = onsale;
const store = onsale.eventStore(eventId);
let MAX = 6;
let admit = null, ev = null, layout = null, bits = null, section = null;
const picked = new Set();
const bandOf = new Map(); // seat id -> band code
const price = new Map(); // band code -> {name, price_paise}

function message(text) { $("message").textContent = text || ""; }
function status(text) { if ($("status").textContent !== (text || "")) $("status").textContent = text || ""; }
function screen(name) {
  for (const id of ["choose", "held", "paying", "done"]) $(id).hidden = id !== name;
  document.body.dataset.screen = name;
  // The session's clock matters while taking or holding seats, not after.
  $("session").classList.toggle("gone", name === "paying" || name === "done");
}

// sessionOpen: the waiting-room session still lets this fan take seats.
function sessionOpen() { return !!admit && Date.parse(admit.expires_at) > Date.now(); }

// holdAuth is the credential for everything about a hold the fan has: the
// hold's grant, else the account token when the account owns it, else (an
// older core) the admit token.
function holdAuth(h) {
  const a = onsale.account();
  if (h && h.hold_token) return h.hold_token;
  if (a && h && h.account === onsale.identity()) return a.token;
  return admit && admit.token;
}

// The session: minutes left to take new seats, then a plain word that it ended.
let sessionTimer = null;
function showSession() {
  const box = $("session");
  if (!admit) { box.hidden = true; return; }
  box.hidden = false;
  const tick = () => {
    const left = Date.parse(admit.expires_at) - Date.now();
    if (left > 0) {
      $("session-text").textContent = "Your turn to take seats ends in";
      $("session-left").textContent = onsale.clock(left);
      return;
    }
    clearInterval(sessionTimer);
    box.classList.add("over");
    $("session-left").textContent = "";
    $("session-text").textContent = store.get("hold") || store.get("booking")
      ? "Your turn to take new seats has ended. You can still pay for the seats you hold."
      : "Your turn to take seats has ended: each fan gets one turn per sale.";
    // The countdown is not a live region (it would be read every second):
    // its end is announced once, here.
    if ($("session-announce").textContent !== $("session-text").textContent) $("session-announce").textContent = $("session-text").textContent;
    document.body.dataset.sessionOver = "1";
    $("best").disabled = true;
    $("hold-picked").disabled = true;
    $("release-note").textContent = "Your turn has ended: if you give these seats back, you cannot take others.";
  };
  tick();
  clearInterval(sessionTimer);
  sessionTimer = setInterval(tick, 1000);
}

function free(pos) { return bits && (bits[pos >> 3] & (0x80 >> (pos & 7))) !== 0; }

async function loadMap() {
  await loadLayout();
  try {
    const r = await api("GET", `/v1/events/${eventId}/seatmap`);
    if (r.status === 200) {
      const raw = atob(r.body.available);
      bits = Uint8Array.from(raw, (c) => c.charCodeAt(0));
      $("free-count").textContent = `${r.body.available_count.toLocaleString("en-IN")} seats free right now.`;
    }
  } catch (e) { /* keep the last map */ }
  drawSections();
  drawSeats(false);
}

function bandText(code) { const b = price.get(code); return b ? `${b.name} ${rupees(b.price_paise)}` : code; }

// drawSections draws the block buttons once and later updates their counts
// and pressed state in place, so a refresh never takes the keyboard focus.
const blockButtons = new Map(); // section code -> {button, count}
function drawSections() {
  const box = $("sections");
  if (blockButtons.size) {
    for (const s of layout.sections) {
      const b = blockButtons.get(s.code);
      if (!b) continue;
      b.button.setAttribute("aria-pressed", String(s.code === section));
      const text = freeText(s);
      if (b.count.textContent !== text) b.count.textContent = text;
    }
    return;
  }
  box.textContent = "";
  for (const s of layout.sections) {
    const bands = [];
    for (const row of s.rows) if (!bands.includes(row.band)) bands.push(row.band);
    const prices = bands.map((c) => (price.get(c) || { price_paise: 0 }).price_paise);
    const lo = Math.min(...prices), hi = Math.max(...prices);
    const names = bands.map((c) => (price.get(c) || { name: c }).name).join(", ");
    const count = el("small", { text: freeText(s) });
    const b = el("button", { type: "button", "data-section": s.code, "aria-pressed": String(s.code === section) },
      el("strong", { text: s.code }), " ", el("small", { text: `${names} · ${lo === hi ? rupees(lo) : rupees(lo) + "–" + rupees(hi)}` }),
      count);
    b.addEventListener("click", () => { section = s.code; drawSections(); drawSeats(true); });
    blockButtons.set(s.code, { button: b, count });
    box.appendChild(b);
  }
}

function freeText(s) {
  let n = 0, total = 0;
  for (const row of s.rows) for (let i = 0; i < row.numbers.length; i++) { total++; if (free(row.pos + i)) n++; }
  return `${n} of ${total} free`;
}

// The seat map of the chosen block: one Tab stop (the roving seat), arrow
// keys move between free seats. A refresh updates the seats in place, so
// focus and scroll stay where the fan left them.
let grid = []; // rows of seat buttons of the drawn block
let drawn = null;
function drawSeats(rebuild) {
  const box = $("seatmap");
  const s = layout.sections.find((x) => x.code === section);
  if (!s) { box.textContent = ""; return; }
  if (!rebuild && drawn === s.code) { refreshSeats(); return; }
  drawn = s.code;
  box.textContent = "";
  grid = [];
  const movie = ev && ev.kind === "movie";
  $("screen").textContent = movie ? "SCREEN" : "STAGE";
  box.append(el("p", { class: "sr-only", text: (movie ? "The screen is in front of row " : "The stage is in front of row ") + s.rows[0].label + "." }));
  let band = null;
  for (const row of s.rows) {
    if (row.band !== band) {
      band = row.band;
      box.append(el("p", { class: "bandrow", text: bandText(band) + " per seat" }));
    }
    const line = el("div", { class: "seatrow", role: "group", "aria-label": `Row ${row.label}, ${bandText(row.band)}` },
      el("span", { class: "label", "aria-hidden": "true", text: row.label }));
    const buttons = [];
    row.numbers.forEach((num, i) => {
      if (i > 0 && num - row.numbers[i - 1] > 1) line.appendChild(el("span", { class: "aisle", "aria-hidden": "true" })); // numbers skip: an aisle
      const id = `${s.code}-${row.label}-${num}`;
      const b = el("button", { type: "button", class: "seat", id: "seat-" + id, tabindex: "-1", text: String(num),
        title: `${id} · ${bandText(row.band)}`, "aria-label": `Row ${row.label} seat ${num}, ${bandText(row.band)}` });
      b.dataset.seat = id;
      b.dataset.pos = row.pos + i;
      b.addEventListener("click", () => toggle(b));
      b.addEventListener("focus", () => rove(b));
      buttons.push(b);
      line.appendChild(b);
    });
    line.appendChild(el("span", { class: "label", "aria-hidden": "true", text: row.label }));
    grid.push(buttons);
    box.appendChild(line);
  }
  refreshSeats();
  cue();
}

function refreshSeats() {
  let roving = null;
  for (const row of grid) for (const b of row) {
    const id = b.dataset.seat;
    const was = b.disabled;
    b.disabled = !free(Number(b.dataset.pos)) && !picked.has(id);
    b.setAttribute("aria-pressed", String(picked.has(id)));
    if (b.tabIndex === 0 && !b.disabled) roving = b;
    if (b.disabled && !was && document.activeElement === b) roving = null;
  }
  if (!roving) {
    for (const row of grid) for (const b of row) b.tabIndex = -1;
    const first = grid.flat().find((b) => !b.disabled);
    if (first) first.tabIndex = 0;
  }
}

function rove(b) {
  for (const row of grid) for (const x of row) if (x !== b && x.tabIndex === 0) x.tabIndex = -1;
  b.tabIndex = 0;
}

function nearest(row, col) {
  let best = null, d = Infinity;
  row.forEach((b, i) => { if (!b.disabled && Math.abs(i - col) < d) { d = Math.abs(i - col); best = b; } });
  return best;
}

$("seatmap").addEventListener("keydown", (e) => {
  const b = e.target.closest(".seat");
  if (!b) return;
  let r = -1, c = -1;
  grid.forEach((row, i) => { const j = row.indexOf(b); if (j >= 0) { r = i; c = j; } });
  if (r < 0) return;
  let next = null;
  const row = grid[r];
  switch (e.key) {
    case "ArrowRight": for (let j = c + 1; j < row.length && !next; j++) if (!row[j].disabled) next = row[j]; break;
    case "ArrowLeft": for (let j = c - 1; j >= 0 && !next; j--) if (!row[j].disabled) next = row[j]; break;
    case "ArrowDown": for (let i = r + 1; i < grid.length && !next; i++) next = nearest(grid[i], c); break;
    case "ArrowUp": for (let i = r - 1; i >= 0 && !next; i--) next = nearest(grid[i], c); break;
    case "Home": next = row.find((x) => !x.disabled); break;
    case "End": next = [...row].reverse().find((x) => !x.disabled); break;
    default: return;
  }
  e.preventDefault();
  if (next) { rove(next); next.focus(); next.scrollIntoView({ block: "nearest", inline: "nearest" }); }
});

function toggle(b) {
  const id = b.dataset.seat;
  if (picked.has(id)) picked.delete(id);
  else if (picked.size < MAX) picked.add(id);
  else message(`At most ${MAX} tickets per person.`);
  b.setAttribute("aria-pressed", String(picked.has(id)));
  showPicked();
}

function seatsTotal(ids) {
  let sum = 0;
  for (const id of ids) sum += (price.get(bandOf.get(id)) || { price_paise: 0 }).price_paise;
  return sum;
}

function showPicked() {
  $("hold-picked").disabled = picked.size === 0 || !sessionOpen();
  if (picked.size === 0) { $("picked-total").textContent = "No seats picked yet."; $("hold-picked").textContent = "Hold seats"; return; }
  const ids = [...picked];
  const total = rupees(seatsTotal(ids));
  $("picked-total").textContent = `${ids.length} seat${ids.length > 1 ? "s" : ""} (${ids.join(", ")}): ${total}`;
  $("hold-picked").textContent = `Hold ${ids.length} seat${ids.length > 1 ? "s" : ""} · ${total}`;
}

function showBest() {
  const b = price.get($("band").value);
  const n = Number($("count").value);
  $("best-total").textContent = b ? `· ${n} × ${rupees(b.price_paise)} = ${rupees(n * b.price_paise)}` : "";
}

// cue shows the sideways-scroll hint when the block is wider than the box.
function cue() {
  const box = $("seatmap-box");
  $("scroll-cue").hidden = box.scrollWidth <= box.clientWidth + 1;
}
const sizes = [1.5, 2, 2.5, 3];
function zoom(step) {
  const now = parseFloat(getComputedStyle($("seatmap-box")).getPropertyValue("--seat")) || 2;
  let i = sizes.findIndex((x) => x >= now - 0.01);
  i = Math.min(sizes.length - 1, Math.max(0, (i < 0 ? 1 : i) + step));
  $("seatmap-box").style.setProperty("--seat", sizes[i] + "rem");
  $("zoom-out").disabled = i === 0;
  $("zoom-in").disabled = i === sizes.length - 1;
  cue();
}

let holding = false;
async function hold(body) {
  if (holding) return;
  if (!sessionOpen()) { message("Your turn to take seats has ended: each fan gets one turn per sale."); return; }
  holding = true;
  $("best").disabled = true; $("hold-picked").disabled = true;
  message("");
  try {
    const r = await api("POST", `/v1/events/${eventId}/holds`, { body, token: admit.token });
    if (r.status === 201) {
      store.set("hold", r.body);
      store.del("pay");
      status("");
      picked.clear();
      showHold(r.body);
      return;
    }
    if (r.status === 409) {
      const seats = (r.body.seats || []).join(", ");
      message(seats ? `Sorry, ${seats} ${r.body.seats.length > 1 ? "were" : "was"} just taken. Here is a fresh map: pick again.`
        : (r.body.message || "Those seats just went. Here is a fresh map."));
      for (const s of r.body.seats || []) picked.delete(s);
      await loadMap();
      return;
    }
    if (r.status === 401 || r.status === 403) {
      admit = { ...admit, expires_at: new Date(0).toISOString() };
      showSession();
      message("Your turn to take seats has ended: each fan gets one turn per sale.");
      return;
    }
    message(r.body.message || "Something went wrong; please try again.");
  } catch (e) {
    message("No connection. Check your network and try again.");
  } finally {
    holding = false;
    $("best").disabled = !sessionOpen();
    showPicked();
  }
}

let holdTimer = null;
function showHold(h) {
  screen("held");
  $("held-seats").textContent = h.seats && h.seats.length ? "Seats " + h.seats.join(", ") : `${h.quantity} tickets`;
  const amount = h.amount_paise || seatsTotal(h.seats || []);
  $("held-total").textContent = "Total to pay: " + rupees(amount);
  $("pay").textContent = "Pay " + rupees(amount) + " with UPI";
  $("pay-card").textContent = "Pay " + rupees(amount) + " by card";
  showMethods();
  const a = onsale.account();
  const c = store.get("contact") || {};
  if (!$("phone").value) $("phone").value = c.phone || (a && a.account && a.account.phone) || "";
  if (!$("email").value) $("email").value = c.email || (a && a.account && a.account.email) || "";
  clearInterval(holdTimer);
  const tick = () => {
    const ms = Date.parse(h.expires_at) - Date.now();
    $("hold-left").textContent = onsale.clock(ms);
    if (ms <= 0) {
      clearInterval(holdTimer);
      store.del("hold");
      store.del("pay");
      message("Your hold ran out and the seats went back on sale." + (sessionOpen() ? " Choose again." : " Your turn to take new seats has ended."));
      toChoose();
    }
  };
  tick();
  holdTimer = setInterval(tick, 1000);
}

// attempt is the payment attempt of this hold: one Idempotency-Key each
// (and one per way to pay: the core keeps a key for one route).
function attempt(h, next, method) {
  let a = store.get("pay");
  if (!a || a.hold !== h.hold_id) a = { hold: h.hold_id, n: 0 };
  method = method || a.method || "upi";
  if (next || !a.key || a.method !== method) {
    a = { hold: h.hold_id, n: a.n + 1, method, key: `${h.hold_id}.${method}.${a.n + 1}.${crypto.randomUUID()}` };
  }
  store.set("pay", a);
  return a;
}

// methods are the ways to pay the box office takes (/web-config.json):
// UPI, card, or both; a refusal of one by the core hides it.
let methods = ["upi", "card"];
async function loadMethods() {
  try {
    const c = await (await fetch("/web-config.json")).json();
    if (Array.isArray(c.payment_methods) && c.payment_methods.length) methods = c.payment_methods;
  } catch (e) { /* both, and the core says if one is not taken */ }
  showMethods();
}
function showMethods() {
  $("pay").hidden = !methods.includes("upi");
  $("pay-card").hidden = !methods.includes("card");
}

// howToPay says what the fan does on the provider's page.
function howToPay(method) {
  $("paying-how").textContent = method === "card"
    ? "Finish the payment on the secure card page (your bank may ask you to confirm). This page updates by itself."
    : "Approve the payment in your UPI app. This page updates by itself.";
}

let paying = false;
async function pay(method) {
  if (paying) return;
  const h = store.get("hold");
  if (!h) return;
  const phone = $("phone").value.replace(/[\s-]/g, "");
  const email = $("email").value.trim();
  if (phone && !/^\+?\d{8,15}$/.test(phone)) { message("That mobile number does not look right: 10 digits, or + and the country code."); $("phone").focus(); return; }
  if (email && !/^[^@\s]+@[^@\s]+\.[^@\s]+$/.test(email)) { message("That email address does not look right."); $("email").focus(); return; }
  paying = true;
  $("pay").disabled = $("pay-card").disabled = true;
  message("");
  const body = {};
  if (phone) body.phone = phone;
  if (email) body.email = email;
  store.set("contact", body);
  try {
    const a = attempt(h, false, method);
    const route = method === "card" ? "confirm" : "payment"; // a card without a token: typed on the provider's page
    const r = await api("POST", `/v1/holds/${h.hold_id}/${route}`, { body, token: holdAuth(h), headers: { "Idempotency-Key": a.key } });
    howToPay(method);
    if (r.status === 201 || r.status === 200 || r.status === 202) {
      const b = r.body.booking || r.body;
      if (b.status === "FAILED") { await declined(h); return; }
      store.set("booking", b.booking_id);
      if (b.status === "CONFIRMED" && b.captured) { showTickets(b); return; }
      if (r.body.payment && r.body.payment.id) await checkoutLink(r.body.payment);
      showPaying(b);
      return;
    }
    if (r.status === 402) { await declined(h); return; } // refused at once: the core keeps this answer for this key
    if (r.status === 410) { message("Your hold ran out before the payment. Nothing was charged." + (sessionOpen() ? " Choose again." : " Your turn to take new seats has ended.")); store.del("hold"); store.del("pay"); toChoose(); return; }
    if (r.status === 422 && r.body.error === "method_unavailable") {
      methods = methods.filter((m) => m !== method);
      if (!methods.length) methods = [method === "card" ? "upi" : "card"];
      showMethods();
      message(method === "card" ? "This box office does not take cards: pay with UPI." : "This box office does not take UPI: pay by card.");
      return;
    }
    if (r.status === 422 && /idempotency/i.test(r.body.message || "")) attempt(h, true, method); // a key the core has seen for another body: the next press uses a new one
    message(r.body.message || "The payment could not start; please try again.");
  } catch (e) {
    message("No connection. Your seats are still held; press Pay again when you are back online.");
  } finally {
    paying = false;
    $("pay").disabled = $("pay-card").disabled = false;
  }
}

// checkoutLink is the provider's page for this payment: the one the core
// names (a real provider's, which sends the fan back here), else the
// simulator's checkout from /web-config.json.
async function checkoutLink(payment) {
  let link = /^https?:\/\//.test(payment.checkout_url || "") ? payment.checkout_url : "";
  if (!link) {
    let url = "";
    try { url = (await (await fetch("/web-config.json")).json()).checkout_url; } catch (e) { /* below */ }
    const back = location.origin + location.pathname;
    link = `${url}/${payment.id}?return=${encodeURIComponent(back)}`;
  }
  store.set("checkout", link);
  $("checkout").href = link;
}

function showPaying(b) {
  screen("paying");
  howToPay((store.get("pay") || {}).method);
  if (b && b.amount_paise) $("paying-total").textContent = paidFor(b);
  const link = store.get("checkout");
  if (link) $("checkout").href = link;
  clearInterval(holdTimer);
  waitForBooking();
}

// waitForBooking polls the booking until the payment settles; a network
// error or a busy server backs off (1.5 s doubling to 15 s), never gives up.
let backoff = 1500, polling = null;
async function waitForBooking() {
  clearTimeout(polling);
  const id = store.get("booking");
  if (!id) return;
  const h = store.get("hold");
  let r;
  try {
    r = await api("GET", `/v1/bookings/${id}`, { token: holdAuth(h) });
  } catch (e) {
    r = { status: 0, body: {} };
  }
  if (r.status === 200) {
    backoff = 1500;
    status("");
    const b = r.body;
    if (b.status === "CONFIRMED" && b.captured) return showTickets(b);
    if (b.status === "REFUND_DUE" || b.status === "REFUNDED") {
      store.del("booking"); store.del("hold"); store.del("pay");
      return finish("Your payment came after the hold ran out", "The seats went to someone else. Your money is being refunded in full.");
    }
    if (b.status === "FAILED") return declined(store.get("hold"));
    if (b.amount_paise) $("paying-total").textContent = paidFor(b);
    polling = setTimeout(waitForBooking, 1500);
    return;
  }
  if (r.status === 401 || r.status === 403 || r.status === 404) {
    // Spinning would not help: this page may no longer read the booking.
    backoff = 1500;
    document.body.dataset.lost = String(r.status);
    status(r.status === 404
      ? "We cannot find this booking any more. If the payment went through, the tickets come by SMS or email, and signed-in fans find them in My tickets."
      : "This page may no longer read your booking (you signed out, or signed in as someone else). If the payment went through, the tickets come by SMS or email, and signed-in fans find them in My tickets.");
    return;
  }
  backoff = Math.min(backoff * 2, 15000);
  status(r.status === 0 ? `Connection lost. Still waiting for your payment; trying again in ${Math.round(backoff / 1000)} s.`
    : `We could not check your payment just now; trying again in ${Math.round(backoff / 1000)} s.`);
  polling = setTimeout(waitForBooking, backoff);
}

// declined: the payment was refused (at once, 402, or later, a FAILED
// booking). Pay extended the hold, so it is read again for its new expiry;
// the next press is a new attempt with a new Idempotency-Key (the core
// replays the refusal for the old one).
async function declined(h) {
  store.del("booking");
  store.del("checkout");
  clearTimeout(polling);
  const held = await refreshHold(h);
  if (held) {
    attempt(held, true);
    showHold(held);
    message("The payment did not go through. Your seats are still held: pay again (another UPI app, or another card).");
  } else {
    message("The payment did not go through, and your hold has ended." + (sessionOpen() ? " Choose again." : " Your turn to take new seats has ended."));
    toChoose();
  }
}

function paidFor(b) {
  return (b.seats && b.seats.length ? "Seats " + b.seats.join(", ") : `${b.quantity} tickets`) + ": " + rupees(b.amount_paise);
}

function finish(title, text) {
  clearInterval(holdTimer);
  clearInterval(sessionTimer);
  $("session").hidden = true;
  screen("done");
  $("done-title").textContent = title;
  $("done-text").textContent = text;
  document.body.dataset.done = "1";
}

async function showTickets(b) {
  const h = store.get("hold");
  const token = holdAuth(h);
  const mine = b.account && b.account === onsale.identity();
  const sent = [b.phone, b.email].filter(Boolean).join(" and ");
  finish("You're going!", `Booking #${b.booking_id} is confirmed. Show each QR code at the gate.` +
    (mine ? " The tickets are also in My tickets" + (sent ? ", and we sent them to " + sent : "") + "."
      : sent ? ` We sent a link to the tickets to ${sent}.` : " Keep this page: you bought as a guest and gave no phone or email."));
  $("all-tickets").hidden = !mine;
  const sum = $("done-summary");
  sum.textContent = "";
  sum.append(onsale.bookingSummary({ ...b, event: b.event || eventSummary() }));
  store.set("done", { booking: b.booking_id, token });
  store.del("pay");
  store.del("checkout");
  await onsale.ticketCards($("tickets"), { ...b, event: b.event || eventSummary() }, token);
  document.body.dataset.tickets = String((b.tickets || []).length);
  // Done: the fan's place in the room goes to the next fan in line now, not
  // when the session would have run out (the queue cookie says who).
  const left = await fetch(`/v1/events/${eventId}/queue`, { method: "DELETE" }).catch(() => null);
  if (left && left.ok) document.body.dataset.left = "1";
}

// refreshHold re-reads a stored hold (its expiry moves when Pay extends it):
// the hold when still ACTIVE, null (and forgotten) when it is gone; the
// stored one when the core cannot say.
async function refreshHold(h) {
  if (!h) return null;
  let r;
  try { r = await api("GET", `/v1/holds/${h.hold_id}`, { token: holdAuth(h) }); } catch (e) { return h; }
  if (r.status === 200 && r.body.status === "ACTIVE") {
    const fresh = { ...h, ...r.body, hold_token: r.body.hold_token || h.hold_token };
    store.set("hold", fresh);
    return fresh;
  }
  if (r.status === 200 || r.status === 404 || r.status === 410) { store.del("hold"); store.del("pay"); return null; }
  return h;
}

function eventSummary() { return ev ? { id: ev.id, name: ev.name, kind: ev.kind, starts_at: ev.starts_at, venue: ev.venue } : {}; }

function toChoose() {
  screen("choose");
  showPicked();
  loadMap();
}

async function release() {
  const h = store.get("hold");
  if (!h || paying) return;
  $("release").disabled = true;
  try {
    const r = await api("DELETE", `/v1/holds/${h.hold_id}`, { token: holdAuth(h) });
    if (r.ok || r.status === 404 || r.status === 410) {
      store.del("hold"); store.del("pay"); store.del("booking"); store.del("checkout");
      clearInterval(holdTimer);
      message("");
      status(sessionOpen() ? "The seats are back on sale. Choose others." : "The seats are back on sale.");
      toChoose();
    } else {
      message(r.body.message || "We could not give the seats back just now; try again.");
    }
  } catch (e) {
    message("No connection. Check your network and try again.");
  } finally {
    $("release").disabled = false;
  }
}

async function loadEvent() {
  const r = await api("GET", `/v1/events/${eventId}`);
  if (r.status !== 200) return;
  ev = r.body;
  onsale.showHeader(ev);
  document.title = ev.name + " · choose seats";
  MAX = Math.min(6, ev.max_per_account || 6);
  for (const b of ev.price_bands) {
    price.set(b.code, b);
    $("band").appendChild(el("option", { value: b.code, text: `${b.name} · ${rupees(b.price_paise)}` }));
    $("prices").appendChild(el("li", {}, b.name + " ", el("strong", { text: rupees(b.price_paise) })));
  }
  for (let n = 1; n <= MAX; n++) $("count").appendChild(el("option", { value: n, text: n, selected: n === Math.min(2, MAX) }));
}

async function start() {
  // A provider's page sends the fan back with its own parameters (after
  // 3-D Secure, Stripe's include the PaymentIntent's client secret): the
  // page needs none of them (the webhook brings the answer), so they leave
  // the address bar and this tab's history entry (the browser's own list
  // of visited pages may still hold the address it arrived at).
  if (location.search) history.replaceState(null, "", location.pathname);
  onsale.accountBar($("account-bar"));
  admit = store.get("admit");
  if (!sessionOpen()) {
    // The queue cookie may know better (a new tab, or storage cleared).
    try {
      const r = await api("GET", `/v1/events/${eventId}/queue/status`);
      if (r.status === 200 && r.body.state === "admitted") {
        admit = { token: r.body.admit_token, expires_at: r.body.admit_expires_at };
        store.set("admit", admit);
      }
    } catch (e) { /* below */ }
  }
  const done = store.get("done"), h = store.get("hold"), booking = store.get("booking");
  if (!admit && !h && !booking && !done) { location.href = `/events/${eventId}`; return; }
  await loadEvent().catch(() => null);
  showSession();
  // The map stays fresh whichever screen the page starts on (a hold given
  // back or run out returns to it).
  setInterval(() => { if (!$("choose").hidden) loadMap(); }, 5000);
  if (booking) return showPaying();
  if (h) {
    // Still held? (released elsewhere, or expired while away)
    const fresh = await refreshHold(h);
    if (fresh) { await loadLayout(); return showHold(fresh); }
  }
  if (done && !sessionOpen()) {
    const r = await api("GET", `/v1/bookings/${done.booking}`, { token: done.token }).catch(() => null);
    if (r && r.status === 200 && r.body.status === "CONFIRMED") return showTickets(r.body);
  }
  await loadLayout();
  toChoose();
}

async function loadLayout() {
  if (layout) return;
  const l = await api("GET", `/v1/events/${eventId}/layout`).catch(() => ({ status: 0 }));
  layout = l.status === 200 ? l.body : { sections: [] };
  for (const s of layout.sections) for (const row of s.rows) for (const n of row.numbers) bandOf.set(`${s.code}-${row.label}-${n}`, row.band);
  section = layout.sections.length ? layout.sections[0].code : null;
  if (!layout.sections.length) $("pick").hidden = true;
}

$("best").addEventListener("click", () => hold({ best_available: { band: $("band").value, count: Number($("count").value) } }));
$("band").addEventListener("change", showBest);
$("count").addEventListener("change", showBest);
$("hold-picked").addEventListener("click", () => hold({ seats: [...picked] }));
$("pay").addEventListener("click", () => pay("upi"));
$("pay-card").addEventListener("click", () => pay("card"));
$("release").addEventListener("click", release);
$("zoom-in").addEventListener("click", () => zoom(1));
$("zoom-out").addEventListener("click", () => zoom(-1));
window.addEventListener("resize", cue);
loadMethods();
start().then(showBest);
