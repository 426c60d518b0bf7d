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
	if s.smsTo == nil {
		s.smsTo = map[string][]int{}
	}
	s.smsTo[m.To] = append(s.smsTo[m.To], len(s.sms)-1)
	s.mu.Unlock()
	writeJSON(w, http.StatusAccepted, m)
}

// SMS returns the messages received so far, oldest first.
func (s *Sim) SMS() []SMS { return s.messages("") }

// messages returns the messages to one number (all when empty), oldest
// first. One number's are found through the index by number: a crowd of
// thousands each reading its sign-in code costs each read its own
// messages, not every message the sink ever took.
func (s *Sim) messages(to string) []SMS {
	s.mu.Lock()
	defer s.mu.Unlock()
	if to == "" {
		return append([]SMS{}, s.sms...)
	}
	out := make([]SMS, 0, len(s.smsTo[to]))
	for _, i := range s.smsTo[to] {
		out = append(out, s.sms[i])
	}
	return out
}
