package check

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// totals mirrors the provider ledger's per-reference totals.
type totals struct {
	Authorized int64 `json:"authorized"`
	Charged    int64 `json:"charged"`
	Captured   int64 `json:"captured"`
	Voided     int64 `json:"voided"`
	Refunded   int64 `json:"refunded"`
}

// entry is one line of the provider's ledger (the fields the checker reads).
type entry struct {
	Time      time.Time `json:"time"`
	Reference string    `json:"reference"`
}

// ledger is the provider's own record of every money movement: the
// checker reads it, never the core's idea of what the provider did.
type ledger struct {
	Totals  map[string]totals `json:"totals"`
	Entries []entry           `json:"entries"`
}

// booking is one booking row as the money check reads it.
type booking struct {
	ID     int64
	Status string
	Amount int64
}

const moneyName = "every charge ends captured-and-confirmed or refunded (money conservation to the paisa)"

// money reads the ledger and the event's bookings and checks conservation
// (conserved), over the whole sale and across each provider outage.
func money(ctx context.Context, conn *pgx.Conn, in Input) ([]Result, error) {
	l, err := fetchLedger(ctx, in.LedgerURL, in.ProviderKey)
	if err != nil {
		return []Result{{moneyName, false, err.Error()}}, nil
	}
	rows, err := conn.Query(ctx, `SELECT id, status, amount_paise FROM bookings WHERE event_id = $1`, in.Event)
	if err != nil {
		return nil, err
	}
	bookings, err := pgx.CollectRows(rows, pgx.RowToStructByPos[booking])
	if err != nil {
		return nil, err
	}
	out := []Result{conserved(bookings, l, nil)}
	for _, w := range in.Outages {
		out = append(out, conserved(bookings, l, &w))
	}
	return out, nil
}

// conserved checks every booking's ledger: a confirmed booking's amount
// captured and nothing refunded; a refunded or failed one has every paisa
// taken given back and every authorization released; and what the
// provider kept equals the confirmed sales. With an outage window, only
// the bookings whose money moved during it or in the two minutes after
// (held webhooks, late captures and refunds) are checked. No ledger entry
// for any booking is no evidence: the rule fails.
func conserved(bookings []booking, l ledger, outage *Window) Result {
	name := moneyName
	var around map[string]bool
	if outage != nil {
		name = fmt.Sprintf("money conserved to the paisa across the provider outage (%s to %s, bookings whose money moved during it or in the 2 minutes after)",
			outage.Start.Format("15:04:05"), outage.End.Format("15:04:05"))
		around = map[string]bool{}
		for _, e := range l.Entries {
			if !e.Time.Before(outage.Start) && e.Time.Before(outage.End.Add(2*time.Minute)) {
				around[e.Reference] = true
			}
		}
	}
	var examples []string
	var off, n, moved int
	var taken, kept, refunded, sold int64
	for _, b := range bookings {
		ref := fmt.Sprintf("booking-%d", b.ID)
		if around != nil && !around[ref] {
			continue
		}
		n++
		t, ok := l.Totals[ref]
		if ok {
			moved++
		}
		taken += t.Captured
		refunded += t.Refunded
		good := true
		switch b.Status {
		case "CONFIRMED":
			good = t.Captured == b.Amount && t.Refunded == 0
			kept += t.Captured
			sold += b.Amount
		case "REFUNDED", "FAILED":
			good = t.Captured == t.Refunded && t.Authorized-t.Voided-(t.Captured-t.Charged) == 0
		}
		if !good {
			off++
			if len(examples) < 3 {
				examples = append(examples, fmt.Sprintf("booking %d %s: %+v (amount %d)", b.ID, b.Status, t, b.Amount))
			}
		}
	}
	detail := fmt.Sprintf("%d bookings (%d with money in the provider's ledger); taken %s, refunded %s, kept %s = confirmed sales %s",
		n, moved, rupees(taken), rupees(refunded), rupees(kept), rupees(sold))
	if off > 0 {
		detail += fmt.Sprintf("; %d bookings off, e.g. %s", off, strings.Join(examples, "; "))
	}
	none := "no booking of the event has an entry in the provider's ledger"
	if outage != nil {
		none = "no booking's money moved during the outage or the 2 minutes after"
	}
	return evidenceOf{moved, none}.rule(Result{name, off == 0 && kept == sold && taken-refunded == sold, detail})
}

func fetchLedger(ctx context.Context, url, key string) (ledger, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return ledger{}, fmt.Errorf("ledger: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ledger{}, fmt.Errorf("ledger: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return ledger{}, fmt.Errorf("ledger: %s %s", resp.Status, b)
	}
	var l ledger
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
		return ledger{}, fmt.Errorf("ledger: %w", err)
	}
	return l, nil
}
