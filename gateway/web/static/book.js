// Booking page: the seat map (layout from the gateway, availability bitmap
// at most a second old), best-available or hand-picked seats, the hold with
// its countdown, Pay (the hold is extended once), the provider's checkout,
// then the confirmation with the QR tickets. A seat taken a moment ago gives
// a clear message and a fresh map, never a dead end. Everything is in
// sessionStorage, so a refresh or the return from the checkout resumes.
"use strict";

const eventId = location.pathname.split("/")[2];
const $ = (id) => document.getElementById(id);
const store = {
  get: (k) => sessionStorage.getItem(`onsale.${k}.${eventId}`),
  set: (k, v) => sessionStorage.setItem(`onsale.${k}.${eventId}`, v),
  del: (k) => sessionStorage.removeItem(`onsale.${k}.${eventId}`),
};
const MAX = 6;
let admit = null, layout = null, bits = null, section = null;
const picked = new Set();

function message(text, kind = "error") {
  $("message").textContent = text || "";
  $("message").className = "message " + kind;
}

async function api(method, path, body, headers = {}) {
  const h = { Accept: "application/json", ...headers };
  if (admit) h.Authorization = "Bearer " + admit;
  if (body !== undefined) h["Content-Type"] = "application/json";
  const res = await fetch(path, { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body) });
  let data = {};
  try { data = await res.json(); } catch (e) { /* empty */ }
  return { status: res.status, body: data };
}

function rupees(paise) {
  return "₹" + (paise / 100).toLocaleString("en-IN", { minimumFractionDigits: 2, maximumFractionDigits: 2 });
}

// The admit token: from this tab, or from the gateway (the queue cookie).
async function admitToken() {
  const r = await api("GET", `/v1/events/${eventId}/queue/status`);
  if (r.status === 200 && r.body.state === "admitted") return r.body.admit_token;
  return null;
}

function free(pos) { return bits && (bits[pos >> 3] & (0x80 >> (pos & 7))) !== 0; }

async function loadMap() {
  const r = await api("GET", `/v1/events/${eventId}/seatmap`);
  if (r.status === 200) {
    const raw = atob(r.body.available);
    bits = Uint8Array.from(raw, (c) => c.charCodeAt(0));
    $("free-count").textContent = `${r.body.available_count.toLocaleString("en-IN")} seats free right now.`;
  }
  drawSections();
  drawSeats();
}

function drawSections() {
  const box = $("sections");
  box.textContent = "";
  for (const s of layout.sections) {
    let n = 0, total = 0;
    for (const row of s.rows) for (let i = 0; i < row.numbers.length; i++) { total++; if (free(row.pos + i)) n++; }
    const b = document.createElement("button");
    b.type = "button";
    b.dataset.section = s.code;
    b.setAttribute("aria-pressed", String(s.code === section));
    b.textContent = `${s.code} · ${s.rows[0].band} · ${n}/${total} free`;
    b.addEventListener("click", () => { section = s.code; drawSections(); drawSeats(); });
    box.appendChild(b);
  }
}

function drawSeats() {
  const box = $("seatmap");
  box.textContent = "";
  const s = layout.sections.find((x) => x.code === section);
  if (!s) return;
  for (const row of s.rows) {
    const line = document.createElement("div");
    line.className = "seatrow";
    const label = document.createElement("span");
    label.className = "label";
    label.textContent = row.label;
    line.appendChild(label);
    row.numbers.forEach((num, i) => {
      const id = `${s.code}-${row.label}-${num}`;
      const b = document.createElement("button");
      b.type = "button";
      b.className = "seat";
      b.id = "seat-" + id;
      b.textContent = num;
      b.title = `${id} · ${row.band}`;
      b.setAttribute("aria-label", `Row ${row.label} seat ${num}, ${row.band}`);
      b.disabled = !free(row.pos + i) && !picked.has(id);
      b.setAttribute("aria-pressed", String(picked.has(id)));
      b.addEventListener("click", () => {
        if (picked.has(id)) picked.delete(id);
        else if (picked.size < MAX) picked.add(id);
        else message(`At most ${MAX} tickets per person.`);
        b.setAttribute("aria-pressed", String(picked.has(id)));
        $("picked-count").textContent = picked.size;
        $("hold-picked").disabled = picked.size === 0;
      });
      line.appendChild(b);
    });
    box.appendChild(line);
  }
}

async function hold(body) {
  message("");
  const r = await api("POST", `/v1/events/${eventId}/holds`, body);
  if (r.status === 201) {
    store.set("hold", JSON.stringify(r.body));
    picked.clear();
    showHold(r.body);
    return;
  }
  if (r.status === 409) {
    const seats = (r.body.seats || []).join(", ");
    message(seats ? `Sorry, ${seats} ${r.body.seats.length > 1 ? "were" : "was"} just taken. Here is a fresh map: pick again.`
      : (r.body.message || "Those seats just went. Here is a fresh map."));
    for (const s of r.body.seats || []) picked.delete(s);
    $("picked-count").textContent = picked.size;
    $("hold-picked").disabled = picked.size === 0;
    await loadMap();
    return;
  }
  if (r.status === 401) { location.href = `/events/${eventId}`; return; }
  message(r.body.message || "Something went wrong; please try again.");
}

let holdTimer = null;
function showHold(h) {
  $("choose").hidden = true;
  $("held").hidden = false;
  $("held-seats").textContent = h.seats.length ? "Seats " + h.seats.join(", ") : `${h.quantity} tickets`;
  clearInterval(holdTimer);
  const tick = () => {
    const s = Math.max(0, Math.round((Date.parse(h.expires_at) - Date.now()) / 1000));
    $("hold-left").textContent = `${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}`;
    if (s === 0) {
      clearInterval(holdTimer);
      store.del("hold");
      message("Your hold ran out and the seats went back on sale. Choose again.");
      $("held").hidden = true;
      $("choose").hidden = false;
      loadMap();
    }
  };
  tick();
  holdTimer = setInterval(tick, 1000);
}

async function pay() {
  const h = JSON.parse(store.get("hold"));
  const key = store.get("paykey") || crypto.randomUUID();
  store.set("paykey", key);
  const phone = $("phone").value.replace(/\s+/g, "");
  $("pay").disabled = true;
  const r = await api("POST", `/v1/holds/${h.hold_id}/payment`, phone ? { phone } : {}, { "Idempotency-Key": key });
  $("pay").disabled = false;
  if (r.status !== 201) {
    if (r.status === 410) { message("Your hold ran out before the payment. Nothing was charged; choose again."); store.del("hold"); }
    else message(r.body.message || "The payment could not start; please try again.");
    return;
  }
  store.set("booking", r.body.booking.booking_id);
  const cfg = await (await fetch("/web-config.json")).json();
  const back = location.origin + location.pathname;
  $("checkout").href = `${cfg.checkout_url}/${r.body.payment.id}?return=${encodeURIComponent(back)}`;
  showPaying();
}

function showPaying() {
  $("choose").hidden = true;
  $("held").hidden = true;
  $("paying").hidden = false;
  waitForBooking();
}

async function waitForBooking() {
  const id = store.get("booking");
  const r = await api("GET", `/v1/bookings/${id}`);
  if (r.status === 200 && r.body.status === "CONFIRMED" && r.body.captured) return showTickets(r.body);
  if (r.status === 200 && (r.body.status === "REFUND_DUE" || r.body.status === "REFUNDED")) {
    return finish("Your payment came after the hold ran out", "The seats went to someone else. Your money is being refunded in full.");
  }
  if (r.status === 200 && r.body.status === "FAILED") {
    store.del("booking");
    message("The payment did not go through. Your seats are still held: try again.");
    const h = store.get("hold");
    if (h) { $("paying").hidden = true; showHold(JSON.parse(h)); }
    return;
  }
  setTimeout(waitForBooking, 1500);
}

function finish(title, text) {
  clearInterval(holdTimer);
  $("paying").hidden = true;
  $("held").hidden = true;
  $("choose").hidden = true;
  $("done").hidden = false;
  $("done-title").textContent = title;
  $("done-text").textContent = text;
  document.body.dataset.done = "1";
}

async function showTickets(b) {
  finish("You're going!", `Booking ${b.booking_id} is confirmed: ${b.quantity} ticket(s), ${rupees(b.amount_paise)}. Show each QR code at the gate.`);
  store.del("hold");
  const box = $("tickets");
  box.textContent = "";
  for (const t of b.tickets) {
    const res = await fetch(t.qr, { headers: { Authorization: "Bearer " + admit } });
    const card = document.createElement("figure");
    card.className = "card ticket";
    const img = document.createElement("img");
    img.alt = `QR code of ticket ${t.n}${t.seat ? ", seat " + t.seat : ""}`;
    img.src = URL.createObjectURL(await res.blob());
    const cap = document.createElement("figcaption");
    cap.textContent = t.seat ? `Seat ${t.seat}` : `General admission #${t.n}`;
    card.append(img, cap);
    box.appendChild(card);
  }
  document.body.dataset.tickets = String(b.tickets.length);
  // Done: the fan's place in the room goes to the next fan in line now, not
  // when the session would have run out (the queue cookie says who).
  const left = await fetch(`/v1/events/${eventId}/queue`, { method: "DELETE" }).catch(() => null);
  if (left && left.ok) document.body.dataset.left = "1";
}

async function start() {
  admit = sessionStorage.getItem("onsale.admit." + eventId) || await admitToken();
  if (!admit) { location.href = `/events/${eventId}`; return; }
  sessionStorage.setItem("onsale.admit." + eventId, admit);
  const ev = await api("GET", `/v1/events/${eventId}`);
  if (ev.status === 200) {
    $("event-name").textContent = ev.body.name + " · " + ev.body.venue.name;
    for (const b of ev.body.price_bands) {
      const o = document.createElement("option");
      o.value = b.code;
      o.textContent = `${b.name} · ${rupees(b.price_paise)}`;
      $("band").appendChild(o);
    }
    for (let n = 1; n <= Math.min(MAX, ev.body.max_per_account); n++) {
      const o = document.createElement("option");
      o.value = n;
      o.textContent = n;
      if (n === 2) o.selected = true;
      $("count").appendChild(o);
    }
  }
  const l = await api("GET", `/v1/events/${eventId}/layout`);
  layout = l.status === 200 ? l.body : { sections: [] };
  section = layout.sections.length ? layout.sections[0].code : null;
  await loadMap();
  setInterval(() => { if (!$("choose").hidden) loadMap(); }, 5000);

  $("best").addEventListener("click", () => hold({ best_available: { band: $("band").value, count: Number($("count").value) } }));
  $("hold-picked").addEventListener("click", () => hold({ seats: [...picked] }));
  $("pay").addEventListener("click", pay);
  $("release").addEventListener("click", async () => {
    const h = JSON.parse(store.get("hold"));
    await api("DELETE", `/v1/holds/${h.hold_id}`);
    store.del("hold");
    location.reload();
  });
  if (store.get("booking")) return showPaying();
  const h = store.get("hold");
  if (h) showHold(JSON.parse(h));
}

start();
