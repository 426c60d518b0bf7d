// Command stafftoken mints a staff token for the gate scanner: the
// operator's command until operators have accounts. It reads the core's
// signing key (the same file as the core's ONSALE_SIGNING_KEY) and prints
// a token for one steward at one gate of one venue:
//
//	stafftoken -signing-key .run/keys/signing.key -venue 1 -gate 3 -name asha -ttl 12h
//
// The steward opens <gateway>/gate and pastes it, or opens
// <gateway>/gate#<token> (a fragment never reaches a server log).
package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/onsale/onsale/core"
	"github.com/onsale/onsale/core/ticket"
	"github.com/onsale/onsale/shared/account"
	"github.com/onsale/onsale/shared/admission"
	"github.com/onsale/onsale/shared/config"
)

// Config is stafftoken's configuration (shared/config).
type Config struct {
	SigningKey string        `env:"ONSALE_SIGNING_KEY" flag:"signing-key" default:".run/keys/signing.key" help:"PEM file of the core's Ed25519 signing key"`
	Venue      int64         `flag:"venue" help:"the venue's id (required)"`
	Gate       string        `flag:"gate" help:"the gate, e.g. 3 or North (required)"`
	Name       string        `flag:"name" help:"the steward's name (required)"`
	TTL        time.Duration `flag:"ttl" default:"12h" min:"1m" max:"168h" help:"how long the token is valid (duration)"`
}

// Validate checks the steward's identity.
func (c *Config) Validate() error {
	if err := c.staff().Validate(); err != nil {
		return errors.New(err.(*core.Error).Message + " (-name, -venue, -gate)")
	}
	return nil
}

func (c *Config) staff() core.Staff { return core.Staff{Name: c.Name, Venue: c.Venue, Gate: c.Gate} }

func main() {
	var c Config
	if code := config.Status("stafftoken", &c); code >= 0 {
		os.Exit(code)
	}
	tok, exp, err := mint(c)
	if err != nil {
		fmt.Fprintln(os.Stderr, "stafftoken:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "staff:%s at gate %s of venue %d, valid until %s\n", c.Name, c.Gate, c.Venue, exp.Format(time.RFC3339))
	fmt.Println(tok)
}

// mint reads the key and signs the token.
func mint(c Config) (string, time.Time, error) {
	key, err := admission.ReadPrivateKeyFile(c.SigningKey)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("signing key: %w", err)
	}
	return ticket.StaffToken(account.NewSigner(key), c.staff(), c.TTL)
}
