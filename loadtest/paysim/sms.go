package paysim

import (
	"net/http"
	"regexp"
	"time"
	"unicode/utf8"
)

// SMS is a text message the sink received.
type SMS struct {
	ID       string    `json:"id"`
	To       string    `json:"to"`
	Body     string    `json:"body"`
	Received time.Time `json:"received"`
}

const maxSMSLen = 1600 // characters: ten concatenated segments

// phone accepts what the core accepts: digits with an optional leading +.
var phone = regexp.MustCompile(`^\+?[0-9]{3,19}$`)

// postSMS stores {"to": "+91...", "body": "..."} and answers 202.
func (s *Sim) postSMS(w http.ResponseWriter, r *http.Request) {
	body, e := readBody(w, r)
	if e != nil {
		writeError(w, e)
		return
	}
	var in struct {
		To   string `json:"to"`
		Body string `json:"body"`
	}
	if err := decode(body, &in); err != nil {
		s.writeErr(w, r, err)
		return
	}
	switch n := utf8.RuneCountInString(in.Body); {
	case !phone.MatchString(in.To):
		writeError(w, errorf(EInvalid, "to must be a phone number like +919812345678"))
		return
	case n == 0 || n > maxSMSLen:
		writeError(w, errorf(EInvalid, "body must be 1 to %d characters", maxSMSLen))
		return
	}
	s.mu.Lock()
	m := SMS{ID: newID("sms"), To: in.To, Body: in.Body, Received: s.now().UTC()}
	s.sms = append(s.sms, m)
	s.mu.Unlock()
	writeJSON(w, http.StatusAccepted, m)
}

// SMS returns the messages received so far, oldest first.
func (s *Sim) SMS() []SMS { return s.messages("") }

// messages returns the messages to one number (all when empty).
func (s *Sim) messages(to string) []SMS {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []SMS{}
	for _, m := range s.sms {
		if to == "" || m.To == to {
			out = append(out, m)
		}
	}
	return out
}
