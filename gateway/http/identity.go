package http

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/valyala/fasthttp"

	"github.com/onsale/onsale/gateway"
	"github.com/onsale/onsale/gateway/token"
)

const visitorCookie = "onsale_vid"

// identity is the fan joining: an account (from an account JWT with a
// verified phone) or, unless identity is required, the visitor cookie. One
// identity holds one place, so tabs, devices and refreshes share it.
// Errors: identity_required (no or a bad account token where one is
// needed), phone_not_verified.
func (s *Server) identity(ctx *fasthttp.RequestCtx) (string, error) {
	if auth := string(ctx.Request.Header.Peek("Authorization")); strings.HasPrefix(auth, "Bearer ") && len(s.cfg.AccountSecret) > 0 {
		var c struct {
			jwt.RegisteredClaims
			PhoneVerified bool `json:"phone_verified"`
		}
		_, err := jwt.ParseWithClaims(strings.TrimPrefix(auth, "Bearer "), &c, func(*jwt.Token) (any, error) { return s.cfg.AccountSecret, nil },
			jwt.WithValidMethods([]string{"HS256"}), jwt.WithExpirationRequired())
		switch {
		case err != nil || c.Subject == "":
			return "", gateway.Errorf(gateway.EIdentity, "the account token is not valid")
		case !c.PhoneVerified:
			return "", gateway.Errorf(gateway.EPhoneUnverified, "verify your phone number to join the queue")
		}
		return "acct:" + c.Subject, nil
	}
	if s.cfg.RequireIdentity {
		return "", gateway.Errorf(gateway.EIdentity, "sign in with a verified phone number to join the queue")
	}
	vid := string(ctx.Request.Header.Cookie(visitorCookie))
	if len(vid) < 16 || len(vid) > 64 {
		vid = token.NewVisitorID()
		setCookie(ctx, visitorCookie, vid, 30*24*time.Hour)
	}
	return "vis:" + vid, nil
}

// proofOfWork checks the X-Pow header against the event's difficulty dial:
// SHA-256 of "<event>:<identity>:<nonce>" must start with difficulty zero
// bits. It makes a join cost a bot CPU while a fan's browser pays it once.
// The error (proof_of_work_required) carries the challenge to solve.
func proofOfWork(ctx *fasthttp.RequestCtx, event int64, identity string, difficulty int) error {
	if difficulty <= 0 || powOK(event, identity, string(ctx.Request.Header.Peek("X-Pow")), difficulty) {
		return nil
	}
	return gateway.Errorf(gateway.EProofOfWork, "send X-Pow: a nonce with SHA-256(\"%d:%s:<nonce>\") starting with %d zero bits", event, identity, difficulty).
		With("challenge", fmt.Sprintf("%d:%s:", event, identity)).With("difficulty", difficulty)
}

func powOK(event int64, identity, nonce string, difficulty int) bool {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%d:%s:%s", event, identity, nonce)))
	return leadingZeros(sum[:]) >= difficulty
}

func leadingZeros(b []byte) int {
	n := 0
	for len(b) >= 8 {
		v := binary.BigEndian.Uint64(b)
		if v != 0 {
			for v&(1<<63) == 0 {
				n++
				v <<= 1
			}
			return n
		}
		n += 64
		b = b[8:]
	}
	return n
}
