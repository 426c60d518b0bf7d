// Package browser holds the end-to-end tests of the fan pages and the
// operator console in real headless Chromium (chromedp) against the real
// stack: PostgreSQL, Redis, the payment simulator, the core and the gateway,
// all started by the tests. Screenshots go to the test's output directory.
package browser
