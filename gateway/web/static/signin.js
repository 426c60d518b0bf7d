// Sign-in page: phone, then the SMS code; then back to where the fan came
// from (?next=, a path on this site only) or to My tickets.
"use strict";

function next() {
  const n = new URLSearchParams(location.search).get("next") || "";
  return n.startsWith("/") && !n.startsWith("//") && !n.startsWith("/\\") ? n : "/me";
}

if (onsale.account()) {
  document.getElementById("title").textContent = "You are signed in";
  location.replace(next());
} else {
  onsale.signinForm(document.getElementById("signin"), () => location.replace(next()));
}
