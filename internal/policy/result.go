package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// decodeResult reads the Wasm entrypoint's value, as opa_json_dump writes
// it: [{"result":{"allow":…,"deny":[{"rule":…,"reason":…},…],"priority":[n]}}].
// That shape is read by hand (encoding/json took ~3 µs and 17 allocations
// per decision, a tenth of one); anything else, an escaped string, another
// key, a number that is not a plain integer, goes through encoding/json
// and the interpreter's checks, so both evaluators read odd values alike.
// nil when the decision is undefined.
func decodeResult(out []byte) (*verdict, error) {
	if v, ok := scanResult(out); ok {
		return v, nil
	}
	return genericResult(out)
}

// genericResult decodes with encoding/json and checks types as the
// interpreter's bindings are checked.
func genericResult(out []byte) (*verdict, error) {
	var rs []struct {
		Result *bindings `json:"result"`
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.UseNumber()
	if err := dec.Decode(&rs); err != nil {
		return nil, fmt.Errorf("wasm result %q: %w", out, err)
	}
	if len(rs) != 1 || rs[0].Result == nil {
		return nil, nil // undefined: the caller reports it like topdown's
	}
	return rs[0].Result.verdict()
}

// resultScanner reads the expected shape; any surprise sets bad.
type resultScanner struct {
	b   []byte
	bad bool
}

func scanResult(out []byte) (*verdict, bool) {
	s := &resultScanner{b: out}
	s.lit(`[{"result":{`)
	v := &verdict{}
	var seen [3]bool // allow, deny, priority: each once
	for i := 0; !s.bad; i++ {
		if i > 0 && !s.next(',') {
			break
		}
		switch key := s.raw(); string(key) {
		case "allow":
			s.once(&seen[0])
			s.lit(":")
			switch {
			case s.next('t'):
				s.lit("rue")
				v.allow = true
			case s.next('f'):
				s.lit("alse")
			default:
				s.bad = true
			}
		case "deny":
			s.once(&seen[1])
			s.lit(":[")
			for j := 0; !s.bad && !s.next(']'); j++ {
				if j > 0 {
					s.lit(",")
				}
				v.violations = append(v.violations, s.violation())
			}
		case "priority":
			s.once(&seen[2])
			s.lit(":[")
			if !s.next(']') {
				n := s.int()
				v.priority = &n
				s.lit("]")
			}
		default:
			s.bad = true
		}
	}
	s.lit("}}]")
	if s.bad || len(s.b) != 0 || !seen[0] {
		return nil, false
	}
	return v, true
}

// violation reads {"rule":…,"reason":…,"waits":true|false} in any order
// ("waits" optional).
func (s *resultScanner) violation() Violation {
	var x Violation
	var seen [3]bool
	s.lit("{")
	for i := 0; !s.bad && !s.next('}'); i++ {
		if i > 0 {
			s.lit(",")
		}
		switch key := s.raw(); string(key) {
		case "rule":
			s.once(&seen[0])
			s.lit(":")
			x.Rule = s.str()
		case "reason":
			s.once(&seen[1])
			s.lit(":")
			x.Reason = s.str()
		case "waits":
			s.once(&seen[2])
			s.lit(":")
			if x.Waits = s.next('t'); x.Waits {
				s.lit("rue")
			} else {
				s.lit("false")
			}
		default:
			s.bad = true
		}
	}
	return x
}

func (s *resultScanner) once(seen *bool) {
	if *seen {
		s.bad = true
	}
	*seen = true
}

// lit consumes want exactly.
func (s *resultScanner) lit(want string) {
	if s.bad || !bytes.HasPrefix(s.b, []byte(want)) {
		s.bad = true
		return
	}
	s.b = s.b[len(want):]
}

// next consumes c if it comes next.
func (s *resultScanner) next(c byte) bool {
	if s.bad || len(s.b) == 0 || s.b[0] != c {
		return false
	}
	s.b = s.b[1:]
	return true
}

// str reads a string without escapes, in valid UTF-8.
func (s *resultScanner) str() string { return string(s.raw()) }

// raw reads a string's bytes, which must need no unescaping.
func (s *resultScanner) raw() []byte {
	if !s.next('"') {
		s.bad = true
		return nil
	}
	end := bytes.IndexByte(s.b, '"')
	if end < 0 || !utf8.Valid(s.b[:end]) {
		s.bad = true
		return nil
	}
	for _, c := range s.b[:end] {
		if c < 0x20 || c == '\\' {
			s.bad = true
			return nil
		}
	}
	str := s.b[:end]
	s.b = s.b[end+1:]
	return str
}

// int reads a JSON integer (-?(0|[1-9][0-9]*)) that fits an int64.
func (s *resultScanner) int() int64 {
	n := 0
	if n < len(s.b) && s.b[n] == '-' {
		n++
	}
	digits := n
	for n < len(s.b) && s.b[n] >= '0' && s.b[n] <= '9' {
		n++
	}
	if n-digits > 1 && s.b[digits] == '0' {
		s.bad = true
	}
	v, err := strconv.ParseInt(string(s.b[:n]), 10, 64)
	if err != nil || s.bad {
		s.bad = true
		return 0
	}
	s.b = s.b[n:]
	return v
}
