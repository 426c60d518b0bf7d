// Package crowd is the demo sale's crowd: fans who arrive before onsale, in
// the wall right after it and over a tail; poll their place at the interval
// the gateway asks for; once admitted read the seat map, hold seats (best
// available, or picked from a map that may be a second stale), pay by UPI or
// card, or walk away, in stated proportions; and leave the room when done.
// Bots hammer the queue with no token or a forged one, and the operators set
// the dials and read their screens once a second.
//
// The crowd keeps its own record of the sale for the checker and the
// report, so that they need not take the system's word: every answer per
// route, class (an HTTP status, no connection, no answer in time) and
// second; each fan's place in line as the fan saw it change; and the
// bookings each fan was told were confirmed. A fan taps again while the
// service fails (no answer, a 5xx), as fans do during a failover.
//
// Where things live:
//
//   - mix.go: the stated proportions and when each fan arrives;
//   - fan.go: one fan, from joining the line to leaving it, its place
//     history and the confirmations it was told: a state machine, one
//     step per request or few, between waits;
//   - schedule.go: the scheduler that runs the fans' steps on bounded
//     sets of workers when their time comes (a min-heap of wake times: no
//     goroutine or timer a fan), the fans in line and the admitted fans
//     each on workers of their own;
//   - seats.go: the layout, and picking seats from an availability bitmap;
//   - bots.go: the bots;
//   - operators.go: the operators' dials and screens (the checker's samples);
//   - client.go: the HTTP client (fasthttp, cookies kept by hand; the
//     fans' polls pipelined over a few connections);
//   - stats.go: what the crowd saw, counted as it happens (answers per
//     route, class and second; latencies in bounded HdrHistograms);
//   - forecast.go: the sale's course predicted by Little's law, and its
//     end as the distribution of the latest chain of lapsed holds.
//
// The crowd is black-box: it speaks only the gateway's HTTP API.
package crowd
