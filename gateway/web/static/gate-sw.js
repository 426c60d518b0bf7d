// The gate scanner's service worker: it keeps /gate and its scripts and
// style, so that a steward who reloads the page with the network down
// still has a scanner (the staff token, the offline pack and the pending
// scans are in the page's localStorage). Network first, so a new release
// is used as soon as it is reachable; the cache only when the network
// fails. The API (/v1/gate/*) is never touched: answers must be live.
// Served from /gate-sw.js (a gateway route) so that its scope can be /gate.
const CACHE = "onsale-gate-v1";
const ASSETS = ["/gate", "/static/gate.js", "/static/gate.css", "/static/qr-decode.js", "/static/qr.js"];

self.addEventListener("install", (ev) => {
  ev.waitUntil(caches.open(CACHE).then((c) => c.addAll(ASSETS)).then(() => self.skipWaiting()));
});

self.addEventListener("activate", (ev) => {
  ev.waitUntil(caches.keys()
    .then((keys) => Promise.all(keys.filter((k) => k.startsWith("onsale-gate-") && k !== CACHE).map((k) => caches.delete(k))))
    .then(() => self.clients.claim()));
});

self.addEventListener("fetch", (ev) => {
  const url = new URL(ev.request.url);
  if (ev.request.method !== "GET" || url.origin !== location.origin) return;
  const key = url.pathname === "/gate" ? "/gate" : url.pathname;
  if (!ASSETS.includes(key)) return; // the API and anything else: straight to the network
  ev.respondWith(fetch(ev.request).then((resp) => {
    if (resp.ok) {
      const copy = resp.clone();
      caches.open(CACHE).then((c) => c.put(key, copy));
    }
    return resp;
  }).catch(() => caches.match(key).then((hit) => hit || Response.error())));
});
