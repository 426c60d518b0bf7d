package main

import (
	"crypto/ed25519"
	"fmt"
	"log/slog"

	"github.com/onsale/onsale/core/http"
	"github.com/onsale/onsale/core/postgres"
	"github.com/onsale/onsale/core/ticket"
	"github.com/onsale/onsale/shared/admission"
)

// gate returns the gate's API (scan, offline pack, sync) when both keys
// come from files: the ticket key (its public half verifies tickets) and
// the signing key (signing, its public half, already loaded: it verifies
// the staff tokens bin/stafftoken signs with the same file). Without
// either file the gate is off: nil, and a warning.
func (m *Main) gate(db *postgres.DB, log *slog.Logger, signing ed25519.PublicKey) (*http.Gate, error) {
	c := m.Config
	if c.TicketKey == "" || c.SigningKey == "" {
		log.Warn("gate off: it needs ONSALE_TICKET_KEY and ONSALE_SIGNING_KEY files (staff tokens are signed with the signing key file)")
		return nil, nil
	}
	tkey, err := admission.ReadPrivateKeyFile(c.TicketKey)
	if err != nil {
		return nil, fmt.Errorf("ticket key: %w", err)
	}
	log.Info("gate on")
	return &http.Gate{CheckIns: db, TicketKey: tkey.Public().(ed25519.PublicKey),
		Staff: ticket.NewStaffVerifier(signing)}, nil
}
