// Command ticketverify checks a ticket the way a gate scanner does, offline:
// the payload from the QR code against the core's ticket public key.
//
//	ticketverify -pub .run/keys/ticket.key.pub 'T2.BQIEF...'
//	echo "$PAYLOAD" | ticketverify -pub ticket.key.pub
//
// It prints the ticket's claims and exits 0 when the signature holds, 1
// when it does not.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/onsale/onsale/core/ticket"
	"github.com/onsale/onsale/shared/admission"
	"github.com/onsale/onsale/shared/config"
)

// Config is ticketverify's configuration (shared/config); the payload is
// the argument after the flags, or the first line of stdin.
type Config struct {
	PublicKey string `env:"ONSALE_TICKET_PUBLIC_KEY" flag:"pub" default:".run/keys/ticket.key.pub" help:"PEM file of the core's ticket public key"`
}

func main() {
	var cfg Config
	flags, payloadArgs := splitArgs(os.Args[1:])
	if err := config.Load(&cfg, flags, os.LookupEnv); err != nil {
		if config.IsHelp(err) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "ticketverify:", err)
		os.Exit(2)
	}
	pub, err := admission.ReadPublicKeyFile(cfg.PublicKey)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ticketverify:", err)
		os.Exit(2)
	}
	payload := strings.Join(payloadArgs, "")
	if payload == "" {
		line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
		payload = line
	}
	c, err := ticket.Verify(pub, payload)
	if err != nil {
		fmt.Println("INVALID:", err)
		os.Exit(1)
	}
	b, _ := json.MarshalIndent(c, "", "  ")
	issued := ""
	if t := c.IssuedAt(); !t.IsZero() {
		issued = ", issued " + t.Format("2006-01-02 15:04:05 MST")
	}
	fmt.Printf("VALID ticket %s (event %d, format v%d)%s\n%s\n", c.Ref(), c.Event, c.Version, issued, b)
}

// splitArgs separates the flags from the payload: flags come first (as
// the flag package wants them); the first argument that is not a flag, or
// the one after "--", starts the payload.
func splitArgs(args []string) (flags, rest []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return args[:i], args[i+1:]
		case !strings.HasPrefix(a, "-") || a == "-":
			return args[:i], args[i:]
		case !strings.Contains(a, "=") && i+1 < len(args) && !isBool(a):
			i++ // the flag's value
		}
	}
	return args, nil
}

// isBool reports whether a is a boolean flag (takes no separate value).
func isBool(a string) bool {
	name := strings.TrimLeft(a, "-")
	return name == "h" || name == "help"
}
