// My tickets: sign in by phone and code, then every booking of the account
// (the core lists upcoming shows first), each with the show's date and time
// at the venue, the venue, seats, amount and large QR codes; and an email
// for tickets. Works after a reload, in a new tab and on another device
// once signed in: the account token is all it needs.
"use strict";

const $ = (id) => document.getElementById(id);
const { api, el, rupees } = onsale;

function message(t) { $("message").textContent = t || ""; }
function status(t) { $("status").textContent = t || ""; }

function signin() {
  $("signin-card").hidden = false;
  $("email-card").hidden = true;
  $("bookings").textContent = "";
  onsale.signinForm($("signin"), () => { $("signin-card").hidden = true; load(); });
}

const words = {
  CONFIRMED: "Confirmed",
  PENDING: "Waiting for the payment",
  PAYMENT_PENDING: "Waiting for the payment",
  REFUND_DUE: "Refund on its way",
  REFUNDED: "Refunded",
  CANCELLED: "Cancelled",
};

async function load() {
  onsale.accountBar($("account-bar"), signin);
  const a = onsale.account();
  if (!a) return signin();
  status("Loading your bookings…");
  let me, list;
  try {
    [me, list] = await Promise.all([api("GET", "/v1/me", { token: a.token }), api("GET", "/v1/me/bookings", { token: a.token })]);
  } catch (e) {
    status("");
    message("No connection. Check your network and reload the page.");
    return;
  }
  if (me.status === 401 || list.status === 401) {
    onsale.signOut(true); // the token ended, not the fan's sales in this browser
    status("");
    message("Please sign in again.");
    return signin();
  }
  if (me.status === 200) {
    onsale.saveAccount({ ...a, account: me.body.account || me.body });
    onsale.accountBar($("account-bar"), signin);
    const acc = me.body.account || me.body;
    $("email-card").hidden = false;
    if (!$("email").value) $("email").value = acc.email || "";
  }
  if (list.status !== 200) {
    status("");
    message(list.body.message || "We could not load your bookings just now; reload the page to try again.");
    return;
  }
  const bookings = list.body.bookings || [];
  document.body.dataset.bookings = String(bookings.length);
  status(bookings.length ? "" : "No bookings yet. Tickets you buy while signed in show up here.");
  const box = $("bookings");
  box.textContent = "";
  const now = Date.now();
  let section = null;
  const tickets = [];
  for (const b of bookings) {
    const ev = b.event || {};
    const past = ev.starts_at && Date.parse(ev.starts_at) < now;
    const heading = past ? "Past shows" : "Upcoming";
    if (heading !== section) { section = heading; box.append(el("h2", { text: heading, class: "group" })); }
    const grid = el("div", { class: "tickets" });
    const card = el("section", { class: "card booking" + (past ? " past" : ""), "aria-label": (ev.name || "Booking") + " " + onsale.when(ev.starts_at, ev.venue && ev.venue.timezone) },
      el("h3", { text: ev.name || "Booking #" + b.booking_id }),
      el("p", { class: "status", text: ev.status === "cancelled" ? "Show cancelled · " + (words[b.status] || b.status) : words[b.status] || b.status }),
      onsale.cancelNote(b) ? el("p", { class: "cancelled", role: "note", text: onsale.cancelNote(b) }) : null,
      onsale.bookingSummary(b, false),
      grid);
    box.append(card);
    if (b.status === "CONFIRMED" && b.captured) tickets.push([grid, b]);
  }
  for (const [grid, b] of tickets) await onsale.ticketCards(grid, b, a.token);
  document.body.dataset.tickets = String(document.querySelectorAll(".ticket img").length);
  document.body.dataset.ready = "1";
}

let saving = false;
$("email-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  if (saving) return;
  const a = onsale.account();
  const email = $("email").value.trim();
  if (!/^[^@\s]+@[^@\s]+\.[^@\s]+$/.test(email)) { message("That email address does not look right."); $("email").focus(); return; }
  saving = true; $("email-save").disabled = true; message("");
  try {
    const r = await api("PATCH", "/v1/me", { token: a && a.token, body: { email } });
    if (r.status === 200) {
      onsale.saveAccount({ ...a, account: r.body.account || r.body });
      $("email-note").textContent = `Saved: we send your tickets to ${email} as well as by SMS.`;
      document.body.dataset.email = email;
    } else message(r.body.message || "We could not save that email.");
  } catch (err) { message("No connection. Check your network and try again."); }
  saving = false; $("email-save").disabled = false;
});

load();
