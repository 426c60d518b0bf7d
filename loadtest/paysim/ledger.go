package paysim

import "time"

// Ledger entry types: every movement of money, and nothing else (a failed
// or pending payment moves none).
const (
	EntryAuthorization = "authorization" // card funds held (manual capture)
	EntryCharge        = "charge"        // money taken at once: UPI approved, card with automatic capture
	EntryCapture       = "capture"       // money taken from an authorization
	EntryVoid          = "void"          // an authorization released (cancel)
	EntryRefund        = "refund"        // money given back
)

// Entry is one line of the ledger.
type Entry struct {
	Seq       int       `json:"seq"` // 1, 2, ... in the order the movements happened
	Time      time.Time `json:"time"`
	Type      string    `json:"type"`
	PaymentID string    `json:"payment_id"`
	RefundID  string    `json:"refund_id"` // refunds only
	Reference string    `json:"reference"`
	Amount    int64     `json:"amount"`
}

// Totals sums one merchant reference's ledger entries, in paise.
//
// Captured is the money actually taken from the payer: captures plus
// automatic charges. Charged is the automatic charges alone, so
// Captured-Charged came from authorizations. The money the merchant keeps
// is Net; an authorization neither captured nor voided is Held.
type Totals struct {
	Authorized int64 `json:"authorized"`
	Charged    int64 `json:"charged"`
	Captured   int64 `json:"captured"`
	Voided     int64 `json:"voided"`
	Refunded   int64 `json:"refunded"`
}

// Net is the money taken and not given back.
func (t Totals) Net() int64 { return t.Captured - t.Refunded }

// Held is the money authorized and neither captured nor released.
func (t Totals) Held() int64 { return t.Authorized - (t.Captured - t.Charged) - t.Voided }

// Ledger is a copy of the ledger with totals per reference.
type Ledger struct {
	Entries []Entry           `json:"entries"`
	Totals  map[string]Totals `json:"totals"`
}

// Ledger returns every entry so far and the totals per reference.
func (s *Sim) Ledger() Ledger { return s.ledgerOf("") }

// ledgerOf returns the entries of reference (all when empty) with totals.
func (s *Sim) ledgerOf(reference string) Ledger {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := Ledger{Entries: []Entry{}, Totals: map[string]Totals{}}
	for _, e := range s.ledger {
		if reference != "" && e.Reference != reference {
			continue
		}
		l.Entries = append(l.Entries, e)
		t := l.Totals[e.Reference]
		switch e.Type {
		case EntryAuthorization:
			t.Authorized += e.Amount
		case EntryCharge:
			t.Charged += e.Amount
			t.Captured += e.Amount
		case EntryCapture:
			t.Captured += e.Amount
		case EntryVoid:
			t.Voided += e.Amount
		case EntryRefund:
			t.Refunded += e.Amount
		}
		l.Totals[e.Reference] = t
	}
	return l
}

// record appends an entry; s.mu is held.
func (s *Sim) record(typ string, p *Payment, refundID string, amount int64) {
	s.ledger = append(s.ledger, Entry{
		Seq:       len(s.ledger) + 1,
		Time:      s.now().UTC(),
		Type:      typ,
		PaymentID: p.ID,
		RefundID:  refundID,
		Reference: p.Reference,
		Amount:    amount,
	})
}
