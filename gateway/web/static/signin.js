// Sign-in page: phone, then the SMS code; then back to where the fan came
// from (?next=, a path on this site only) or to My tickets.
"use strict";

// next is where to go after signing in: a page of this site only. The
// browser's own URL parser decides (it folds tabs, backslashes and the
// like that string checks miss, as in /%09/evil.com), and the whole
// same-origin URL is used: a path alone can read //evil.com (from
// /.//evil.com), which the browser would take as another host.
function next() {
  const n = new URLSearchParams(location.search).get("next") || "";
  try {
    const u = new URL(n, location.origin);
    if (n && u.origin === location.origin) return u.href;
  } catch (e) { /* not a URL: My tickets */ }
  return "/me";
}

if (onsale.account()) {
  document.getElementById("title").textContent = "You are signed in";
  location.replace(next());
} else {
  onsale.signinForm(document.getElementById("signin"), () => location.replace(next()));
}
