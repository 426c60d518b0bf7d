// Command admitkey manages the gateway's admit-token keys: gen writes a new
// Ed25519 key pair; mint signs an admit token with it (for development and
// load tests: in production only the gateway mints).
package main

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/onsale/onsale/shared/admission"
	"github.com/onsale/onsale/shared/config"
)

// Config is admitkey's options (flags of both subcommands; the admitkey
// table of docs/configuration.md is generated from it).
type Config struct {
	Key     string        `flag:"key" default:"admit.key" help:"private key file; gen writes the public key to FILE.pub"`
	Force   bool          `flag:"force" default:"false" help:"gen: overwrite an existing key"`
	Event   int64         `flag:"event" default:"0" min:"0" help:"mint: event id (required)"`
	Account string        `flag:"account" help:"mint: account id (required)"`
	TTL     time.Duration `flag:"ttl" default:"10m" min:"1s" max:"720h" help:"mint: token lifetime"`
	Max     int           `flag:"max" default:"0" min:"0" help:"mint: ticket limit claim (0: the event's)"`
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var c Config
	if err := config.Load(&c, os.Args[2:], func(string) (string, bool) { return "", false }); err != nil {
		if config.IsHelp(err) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "admitkey:", err)
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "gen":
		err = gen(c)
	case "mint":
		err = mint(c)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "admitkey:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: admitkey gen -key FILE [-force] | admitkey mint -key FILE -event ID -account ACCT [-ttl 10m] [-max N]")
	os.Exit(2)
}

func gen(c Config) error {
	if _, err := os.Stat(c.Key); err == nil && !c.Force {
		fmt.Println(c.Key, "exists; keeping it")
		return nil
	}
	priv, err := admission.GenerateKey()
	if err != nil {
		return err
	}
	if err := admission.WritePrivateKeyFile(c.Key, priv); err != nil {
		return err
	}
	if err := admission.WritePublicKeyFile(c.Key+".pub", priv.Public().(ed25519.PublicKey)); err != nil {
		return err
	}
	fmt.Println("wrote", c.Key, "and", c.Key+".pub", "kid", admission.KeyID(priv.Public().(ed25519.PublicKey)))
	return nil
}

func mint(c Config) error {
	if c.Event <= 0 || c.Account == "" {
		return errors.New("mint needs -event and -account")
	}
	priv, err := admission.ReadPrivateKeyFile(c.Key)
	if err != nil {
		return err
	}
	tok, err := admission.NewSigner(priv).Admit(c.Account, c.Event, c.Max, c.TTL)
	if err != nil {
		return err
	}
	fmt.Println(tok)
	return nil
}
