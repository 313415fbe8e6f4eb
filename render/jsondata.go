package render

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// decodeObject decodes a JSON object as encoding/json's Decoder with
// UseNumber does into a map[string]any (numbers as json.Number). It parses
// the text CUE's MarshalJSON writes directly; a string with an escape or
// a non-ASCII byte is decoded by encoding/json, and a text it does not
// expect (not an object, invalid, trailing data) goes to encoding/json
// whole, errors included.
func decodeObject(data []byte) (map[string]any, error) {
	p := jsonParser{data: data}
	p.space()
	if p.peek() == '{' {
		if v, ok := p.value(); ok {
			p.space()
			if p.i == len(p.data) {
				return v.(map[string]any), nil
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var m map[string]any
	err := dec.Decode(&m)
	return m, err
}

type jsonParser struct {
	data []byte
	i    int
}

func (p *jsonParser) peek() byte {
	if p.i < len(p.data) {
		return p.data[p.i]
	}
	return 0
}

func (p *jsonParser) space() {
	for p.i < len(p.data) {
		switch p.data[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// value parses one value; ok is false on anything it does not handle.
func (p *jsonParser) value() (any, bool) {
	p.space()
	switch c := p.peek(); {
	case c == '{':
		p.i++
		m := map[string]any{}
		p.space()
		if p.peek() == '}' {
			p.i++
			return m, true
		}
		for {
			p.space()
			k, ok := p.string()
			if !ok {
				return nil, false
			}
			p.space()
			if p.peek() != ':' {
				return nil, false
			}
			p.i++
			v, ok := p.value()
			if !ok {
				return nil, false
			}
			m[k] = v
			p.space()
			switch p.peek() {
			case ',':
				p.i++
			case '}':
				p.i++
				return m, true
			default:
				return nil, false
			}
		}
	case c == '[':
		p.i++
		l := []any{}
		p.space()
		if p.peek() == ']' {
			p.i++
			return l, true
		}
		for {
			v, ok := p.value()
			if !ok {
				return nil, false
			}
			l = append(l, v)
			p.space()
			switch p.peek() {
			case ',':
				p.i++
			case ']':
				p.i++
				return l, true
			default:
				return nil, false
			}
		}
	case c == '"':
		return p.string()
	case c == 't':
		return true, p.literal("true")
	case c == 'f':
		return false, p.literal("false")
	case c == 'n':
		return nil, p.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	}
	return nil, false
}

func (p *jsonParser) literal(s string) bool {
	if !bytes.HasPrefix(p.data[p.i:], []byte(s)) {
		return false
	}
	p.i += len(s)
	return true
}

// string parses a string; one with an escape or a non-ASCII byte is
// decoded by encoding/json.
func (p *jsonParser) string() (string, bool) {
	if p.peek() != '"' {
		return "", false
	}
	start := p.i
	p.i++
	plain := true
	for p.i < len(p.data) {
		c := p.data[p.i]
		switch {
		case c == '"':
			p.i++
			if plain {
				return string(p.data[start+1 : p.i-1]), true
			}
			var s string
			if err := json.Unmarshal(p.data[start:p.i], &s); err != nil {
				return "", false
			}
			return s, true
		case c == '\\':
			plain = false
			p.i += 2
			continue
		case c < 0x20:
			return "", false
		case c >= utf8.RuneSelf:
			plain = false
		}
		p.i++
	}
	return "", false
}

// number parses a number as JSON's grammar has it, as its text.
func (p *jsonParser) number() (any, bool) {
	start := p.i
	digits := func() bool {
		n := p.i
		for p.i < len(p.data) && p.data[p.i] >= '0' && p.data[p.i] <= '9' {
			p.i++
		}
		return p.i > n
	}
	if p.peek() == '-' {
		p.i++
	}
	if p.peek() == '0' {
		p.i++
	} else if !digits() {
		return nil, false
	}
	if p.peek() == '.' {
		p.i++
		if !digits() {
			return nil, false
		}
	}
	if c := p.peek(); c == 'e' || c == 'E' {
		p.i++
		if c := p.peek(); c == '+' || c == '-' {
			p.i++
		}
		if !digits() {
			return nil, false
		}
	}
	return json.Number(p.data[start:p.i]), true
}
