// Shared by the fan pages: the account kept in localStorage
// ("onsale.account": {token, expires_at, account}), the JSON API helper,
// money and show-time formatting (the venue's time zone), the sign-in form
// (phone, then the SMS code) and the ticket cards with their QR codes.
// Loaded before each page's own script; everything hangs off `onsale`.
"use strict";

const onsale = (() => {
  const KEY = "onsale.account";

  function el(tag, attrs = {}, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "text") e.textContent = v;
      else if (k === "class") e.className = v;
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? "" : v);
    }
    for (const k of kids) if (k !== null && k !== undefined) e.append(k);
    return e;
  }

  // account is the signed-in account, or null (never signed in, signed out
  // or the token expired).
  function account() {
    let a = null;
    try { a = JSON.parse(localStorage.getItem(KEY)); } catch (e) { /* garbage: signed out */ }
    if (!a || !a.token) return null;
    if (a.expires_at && Date.parse(a.expires_at) <= Date.now()) {
      localStorage.removeItem(KEY);
      return null;
    }
    return a;
  }
  function saveAccount(a) { localStorage.setItem(KEY, JSON.stringify(a)); }
  // signOut forgets the account and what this browser kept of its sales
  // (holds, payment attempts, sessions, bookings: the per-event keys).
  // keepSales forgets only the account: a token the gateway refused
  // (expired, a retired key) ends the sign-in, not the fan's holds and
  // bookings, which come back when the fan signs in again.
  function signOut(keepSales) {
    const mine = "." + who();
    localStorage.removeItem(KEY);
    if (mine === ".guest" || keepSales === true) return;
    for (let i = localStorage.length - 1; i >= 0; i--) {
      const k = localStorage.key(i);
      if (k && k.startsWith("onsale.") && k.endsWith(mine)) localStorage.removeItem(k);
    }
  }
  // identity is the account's identity as holds and bookings name it.
  function identity() { const a = account(); return a && a.account ? "acct:" + a.account.id : null; }
  // who names the person this browser acts for in per-event keys: the
  // account, or "guest".
  function who() { const a = account(); return a && a.account ? "acct" + a.account.id : "guest"; }

  // eventStore keeps one event's state (hold, payment attempt, admit,
  // booking, done) in localStorage under the person's keys, so a second
  // account in this browser never resumes the first one's hold.
  function eventStore(ev) {
    const key = (k) => `onsale.${k}.${ev}.${who()}`;
    return {
      get: (k) => { try { return JSON.parse(localStorage.getItem(key(k))); } catch (e) { return null; } },
      set: (k, v) => localStorage.setItem(key(k), JSON.stringify(v)),
      del: (k) => localStorage.removeItem(key(k)),
    };
  }

  // api calls the JSON API. It throws only when the network fails.
  async function api(method, path, { body, token, headers = {} } = {}) {
    const h = { Accept: "application/json", ...headers };
    if (token) h.Authorization = "Bearer " + token;
    if (body !== undefined) h["Content-Type"] = "application/json";
    const res = await fetch(path, { method, headers: h, credentials: "same-origin",
      body: body === undefined ? undefined : JSON.stringify(body) });
    let data = {};
    try { data = await res.json(); } catch (e) { /* not JSON */ }
    return { status: res.status, ok: res.ok, body: data, retry: Number(res.headers.get("Retry-After") || 0) };
  }

  function rupees(paise) {
    return "₹" + (paise / 100).toLocaleString("en-IN", { minimumFractionDigits: 0, maximumFractionDigits: 2 });
  }

  // when says a show's date and time as the venue's clock reads it.
  function when(iso, tz) {
    if (!iso) return "";
    const opts = { weekday: "short", day: "numeric", month: "short", year: "numeric", hour: "numeric", minute: "2-digit", timeZoneName: "short" };
    try { return new Intl.DateTimeFormat("en-IN", { ...opts, timeZone: tz || undefined }).format(new Date(iso)); }
    catch (e) { return new Intl.DateTimeFormat("en-IN", opts).format(new Date(iso)); }
  }
  // timeOfDay says a time of day as the venue's clock reads it, with the
  // zone's name (a fan abroad reads the venue's time, labelled).
  function timeOfDay(iso, tz) {
    const opts = { hour: "numeric", minute: "2-digit", timeZoneName: "short" };
    try { return new Intl.DateTimeFormat("en-IN", { ...opts, timeZone: tz || undefined }).format(new Date(iso)); }
    catch (e) { return new Intl.DateTimeFormat("en-IN", opts).format(new Date(iso)); }
  }
  function clock(ms) {
    const s = Math.max(0, Math.round(ms / 1000));
    const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = s % 60;
    return (h ? h + ":" + String(m).padStart(2, "0") : m) + ":" + String(sec).padStart(2, "0");
  }
  function venueLine(v) { return v ? [v.name, v.city].filter(Boolean).join(", ") : ""; }

  // showHeader fills the page's event heading: name, then date, time and venue.
  function showHeader(ev) {
    const name = document.getElementById("event-name");
    if (name) name.textContent = ev.name;
    const meta = document.getElementById("event-when");
    if (meta) meta.textContent = [when(ev.starts_at, ev.venue && ev.venue.timezone), venueLine(ev.venue)].filter(Boolean).join(" · ");
  }

  // accountBar shows who is signed in (and a way out) in the element `box`.
  function accountBar(box, onChange) {
    box.textContent = "";
    const a = account();
    if (!a) return;
    box.append(el("span", { text: "Signed in as " + (a.account ? a.account.phone : "you") + " " }),
      el("button", { type: "button", class: "link", id: "signout", text: "Sign out", onclick: () => { signOut(); accountBar(box, onChange); if (onChange) onChange(null); } }));
  }

  // signinForm puts the two-step sign-in (phone, then code) into `box` and
  // calls done(account) once signed in.
  function signinForm(box, done, intro) {
    box.textContent = "";
    const msg = el("p", { class: "message error", id: "signin-message", role: "alert" });
    const phone = el("input", { id: "signin-phone", type: "tel", autocomplete: "tel", inputmode: "tel", placeholder: "98765 43210", required: true });
    const send = el("button", { id: "signin-send", type: "submit", text: "Send code" });
    const step1 = el("form", { class: "signin", novalidate: true },
      intro ? el("p", { text: intro }) : null,
      el("label", { for: "signin-phone", text: "Mobile number" }),
      el("div", { class: "row" }, phone, send),
      el("p", { class: "muted small", text: "We send a 6-digit code by SMS. No password needed." }));
    const code = el("input", { id: "signin-code", type: "text", inputmode: "numeric", autocomplete: "one-time-code", maxlength: "6", pattern: "[0-9]{6}", required: true });
    const verify = el("button", { id: "signin-verify", type: "submit", text: "Sign in" });
    const sentTo = el("p", { id: "signin-sent" });
    const again = el("button", { type: "button", class: "link", id: "signin-again", text: "Use another number" });
    const step2 = el("form", { class: "signin", novalidate: true, hidden: true },
      sentTo,
      el("label", { for: "signin-code", text: "6-digit code" }),
      el("div", { class: "row" }, code, verify),
      el("p", {}, again));
    box.append(step1, step2, msg);
    let busy = false;
    const say = (t) => { msg.textContent = t || ""; };

    step1.addEventListener("submit", async (e) => {
      e.preventDefault();
      if (busy) return;
      const p = phone.value.replace(/[\s-]/g, "");
      if (!/^\+?\d{8,15}$/.test(p)) { say("Enter your mobile number: 10 digits, or + and the country code."); phone.focus(); return; }
      busy = true; send.disabled = true; say("");
      try {
        const r = await api("POST", "/v1/auth/code", { body: { phone: p } });
        if (r.status === 202 || r.status === 200) {
          sentTo.textContent = `We sent a code to ${p}. It works for 5 minutes.`;
          step1.hidden = true; step2.hidden = false; code.value = ""; code.focus();
        } else if (r.status === 429) {
          const wait = r.retry || 60;
          say(`A code was sent to this number a moment ago. Use that one, or ask for a new one in ${wait < 120 ? wait + " seconds" : Math.ceil(wait / 60) + " minutes"}.`);
          if (wait < 120) { step1.hidden = true; step2.hidden = false; sentTo.textContent = `Enter the code we sent to ${p} earlier.`; code.focus(); }
        } else {
          say(r.body.message || "We could not send a code to that number.");
        }
      } catch (err) { say("No connection. Check your network and try again."); }
      busy = false; send.disabled = false;
    });
    step2.addEventListener("submit", async (e) => {
      e.preventDefault();
      if (busy) return;
      const c = code.value.replace(/\D/g, "");
      if (c.length !== 6) { say("The code has 6 digits."); code.focus(); return; }
      busy = true; verify.disabled = true; say("");
      try {
        const r = await api("POST", "/v1/auth/verify", { body: { phone: phone.value.replace(/[\s-]/g, ""), code: c } });
        if (r.status === 200 && r.body.token) {
          saveAccount({ token: r.body.token, expires_at: r.body.expires_at, account: r.body.account });
          busy = false;
          done(account());
          return;
        }
        if (r.status === 429) say("Too many tries. Wait a few minutes, then ask for a new code.");
        else say("That code is not right or has expired. Check the SMS, or use another number to get a new code.");
      } catch (err) { say("No connection. Check your network and try again."); }
      busy = false; verify.disabled = false;
    });
    again.addEventListener("click", () => { step2.hidden = true; step1.hidden = false; say(""); phone.focus(); });
  }

  // ticketCards draws a booking's tickets (large QR codes, fetched with
  // the token that may read the booking) into `box`.
  async function ticketCards(box, b, token) {
    box.textContent = "";
    const ev = b.event || {};
    for (const t of b.tickets || []) {
      const img = el("img", { class: "qr", width: "280", height: "280", alt: `QR code of ticket ${t.n}${t.seat ? ", seat " + t.seat : ""}` });
      const card = el("figure", { class: "ticket" },
        el("div", { class: "qr-frame" }, img),
        el("figcaption", {},
          el("strong", { text: t.seat ? "Seat " + t.seat : "General admission · ticket " + t.n }),
          ev.name ? el("span", { text: ev.name }) : null,
          ev.starts_at ? el("span", { text: when(ev.starts_at, ev.venue && ev.venue.timezone) }) : null));
      box.append(card);
      try {
        const res = await fetch(t.qr, { headers: token ? { Authorization: "Bearer " + token } : {} });
        if (res.ok) img.src = URL.createObjectURL(await res.blob());
        else img.alt = "This QR code could not be loaded; reload the page.";
      } catch (e) { img.alt = "This QR code could not be loaded; reload the page."; }
    }
  }

  // cancelNote says a cancelled show's booking is void and where its money
  // is ("" when the show goes ahead).
  function cancelNote(b) {
    const ev = b.event || {};
    if (ev.status !== "cancelled") return "";
    const money = b.status === "REFUNDED" ? `${rupees(b.amount_paise)} has been refunded to the account you paid from.`
      : b.status === "REFUND_DUE" ? `${rupees(b.amount_paise)} is on its way back to the account you paid from; banks usually show it within 5 to 7 working days.`
        : b.status === "FAILED" ? "Nothing was charged for it."
          : "If your payment still goes through, it is refunded in full.";
    return `This show has been cancelled${ev.cancel_reason ? ": " + ev.cancel_reason.replace(/\.$/, "") : ""}. Your tickets are no longer valid. ${money}`;
  }

  // bookingSummary is a booking's show, date, venue, seats and amount.
  function bookingSummary(b, withShow = true) {
    const ev = b.event || {};
    const seats = b.seats && b.seats.length ? "Seats " + b.seats.join(", ") : `${b.quantity} ticket${b.quantity === 1 ? "" : "s"}`;
    return el("dl", { class: "summary" },
      withShow ? el("dt", { text: "Show" }) : null, withShow ? el("dd", { text: ev.name || "Event " + b.event_id }) : null,
      el("dt", { text: "When" }), el("dd", { text: ev.starts_at ? when(ev.starts_at, ev.venue && ev.venue.timezone) : "–" }),
      el("dt", { text: "Where" }), el("dd", { text: venueLine(ev.venue) || "–" }),
      el("dt", { text: "Tickets" }), el("dd", { text: seats }),
      el("dt", { text: "Paid" }), el("dd", { text: rupees(b.amount_paise) }),
      el("dt", { text: "Booking" }), el("dd", { text: "#" + b.booking_id }));
  }

  return { el, account, saveAccount, signOut, identity, who, eventStore, api, rupees, when, timeOfDay, clock, venueLine, showHeader, accountBar, signinForm, ticketCards, bookingSummary, cancelNote };
})();
