package core

import "time"

// Sales are a show's figures for its box office, per price band and in
// total. Sold counts the tickets of confirmed bookings; Held, seats (or GA
// tickets) under holds still running; Available, the rest of the
// capacity; Refunded, the tickets of bookings whose money went back (or is
// on its way: a cancelled show's, a late payment's). Amounts are at the
// band's price, in paise.
type Sales struct {
	EventID int64       `json:"event_id"`
	AsOf    time.Time   `json:"as_of"`
	Bands   []BandSales `json:"bands"`
	Total   BandSales   `json:"total"`
}

// BandSales are one band's figures (Total: Code and Name empty).
type BandSales struct {
	Code          string `json:"code,omitempty"`
	Name          string `json:"name,omitempty"`
	PricePaise    int64  `json:"price_paise,omitempty"`
	Capacity      int    `json:"capacity"`
	Sold          int    `json:"sold"`
	Held          int    `json:"held"`
	Available     int    `json:"available"`
	RevenuePaise  int64  `json:"revenue_paise"`
	Refunded      int    `json:"refunded"`
	RefundedPaise int64  `json:"refunded_paise"`
}

// Attendee is one valid ticket of a show, for the gate's list: whose
// booking, which seat, and whether it was scanned in.
type Attendee struct {
	Ticket      string     `json:"ticket"` // TicketRef: <booking>-<n>
	Booking     int64      `json:"booking"`
	Seat        string     `json:"seat,omitempty"` // empty: general admission
	Band        string     `json:"band"`
	Phone       string     `json:"phone,omitempty"`
	Email       string     `json:"email,omitempty"`
	CheckedInAt *time.Time `json:"checked_in_at,omitempty"`
	Gate        string     `json:"gate,omitempty"`
}
