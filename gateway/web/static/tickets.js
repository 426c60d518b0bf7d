// Ticket link page (/tickets/<booking>#<token>): the link in the SMS and the
// email. The token rides in the URL fragment, which no browser sends to a
// server or in a Referer; the page sends it as a Bearer token, then takes
// it out of the address bar (kept in this tab's sessionStorage, so a reload
// still works). It can only read this booking and its QR codes.
"use strict";

const $ = (id) => document.getElementById(id);
const id = location.pathname.split("/")[2];
const KEY = "onsale.link." + id;

function message(t) { $("message").textContent = t || ""; }
function status(t) { $("status").textContent = t || ""; }

async function start() {
  let token = location.hash.replace(/^#/, "");
  if (token) {
    try { sessionStorage.setItem(KEY, token); } catch (e) { /* private mode: this load only */ }
    history.replaceState(null, "", location.pathname + location.search);
  } else {
    token = sessionStorage.getItem(KEY) || "";
  }
  if (!token || !/^\d+$/.test(id)) {
    status("");
    message("This link is incomplete. Open it again from the SMS or email, or sign in to My tickets.");
    return;
  }
  let r;
  try { r = await onsale.api("GET", `/v1/bookings/${id}`, { token }); } catch (e) {
    status("");
    message("No connection. Check your network and reload the page.");
    return;
  }
  status("");
  if (r.status === 401 || r.status === 403) {
    message("This link has expired or is not valid. Sign in to My tickets with your mobile number to see your bookings.");
    return;
  }
  if (r.status !== 200) {
    message(r.body.message || "We could not find this booking.");
    return;
  }
  const b = r.body;
  if (b.event) {
    onsale.showHeader(b.event);
    document.title = b.event.name + " · your tickets";
  }
  $("booking").hidden = false;
  $("summary").append(onsale.bookingSummary(b));
  if (b.status === "CONFIRMED" && b.captured) {
    $("title").textContent = `${b.quantity} ticket${b.quantity === 1 ? "" : "s"}`;
    await onsale.ticketCards($("tickets"), b, token);
  } else if (onsale.cancelNote(b)) {
    $("title").textContent = "This show has been cancelled";
    $("summary").prepend(onsale.el("p", { class: "cancelled", role: "note", text: onsale.cancelNote(b) }));
  } else {
    $("title").textContent = b.status === "REFUNDED" || b.status === "REFUND_DUE" ? "This booking was refunded" : "This booking has no tickets yet";
  }
  document.body.dataset.tickets = String(document.querySelectorAll(".ticket img").length);
  document.body.dataset.ready = "1";
}

start();
