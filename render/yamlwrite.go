package render

import (
	"bytes"
	"encoding/json"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// appendYAML appends the YAML document go.yaml.in/yaml/v2's Encoder writes
// for yamlValue(m), m a JSON object (numbers as json.Number), byte for
// byte, and reports whether it could: it writes block
// mappings and sequences, and scalars whose YAML is certain (printable
// ASCII; plain where the encoder writes them plain, double-quoted where it
// quotes them and no escape or line fold applies). For anything else (a
// line break, a non-ASCII rune, a plain scalar the emitter would quote or
// fold) it returns false and the caller runs the encoder. yaml/v2's
// encoder keeps every event of a document in a queue, about half a
// kilobyte per scalar: it was a quarter of a render's allocations.
func appendYAML(buf []byte, m map[string]any) ([]byte, bool) {
	if len(m) == 0 {
		return append(buf, "{}\n"...), true
	}
	return appendYAMLMapping(buf, 0, m, false)
}

// appendYAMLMapping writes the entries of a non-empty mapping at indent;
// inline means the first key follows a sequence's "- " on the same line.
func appendYAMLMapping(buf []byte, indent int, m map[string]any, inline bool) ([]byte, bool) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return yamlKeyLess(keys[i], keys[j]) })
	// The encoder sorts with the same order; both agree on one result
	// when it is a strict order on these keys.
	for i := 1; i < len(keys); i++ {
		if !yamlKeyLess(keys[i-1], keys[i]) || yamlKeyLess(keys[i], keys[i-1]) {
			return buf, false
		}
	}
	var ok bool
	for i, k := range keys {
		if i > 0 || !inline {
			buf = appendIndent(buf, indent)
		}
		// A key longer than 128 bytes is not a simple key: the encoder
		// writes it after "? ".
		if len(k) > 128 {
			return buf, false
		}
		if buf, ok = appendYAMLString(buf, k, true); !ok {
			return buf, false
		}
		buf = append(buf, ':')
		switch v := m[k].(type) {
		case map[string]any:
			if len(v) == 0 {
				buf = append(buf, " {}\n"...)
				continue
			}
			buf = append(buf, '\n')
			if buf, ok = appendYAMLMapping(buf, indent+2, v, false); !ok {
				return buf, false
			}
		case []any:
			if len(v) == 0 {
				buf = append(buf, " []\n"...)
				continue
			}
			buf = append(buf, '\n')
			// A sequence in a mapping is not indented.
			if buf, ok = appendYAMLSequence(buf, indent, v, false); !ok {
				return buf, false
			}
		default:
			buf = append(buf, ' ')
			if buf, ok = appendYAMLScalar(buf, v); !ok {
				return buf, false
			}
			buf = append(buf, '\n')
		}
	}
	return buf, true
}

// appendYAMLSequence writes the items of a non-empty sequence at indent;
// inline means the first item follows a "- " on the same line.
func appendYAMLSequence(buf []byte, indent int, l []any, inline bool) ([]byte, bool) {
	var ok bool
	for i, e := range l {
		if i > 0 || !inline {
			buf = appendIndent(buf, indent)
		}
		buf = append(buf, "- "...)
		switch v := e.(type) {
		case map[string]any:
			if len(v) == 0 {
				buf = append(buf, "{}\n"...)
				continue
			}
			if buf, ok = appendYAMLMapping(buf, indent+2, v, true); !ok {
				return buf, false
			}
		case []any:
			if len(v) == 0 {
				buf = append(buf, "[]\n"...)
				continue
			}
			if buf, ok = appendYAMLSequence(buf, indent+2, v, true); !ok {
				return buf, false
			}
		default:
			if buf, ok = appendYAMLScalar(buf, v); !ok {
				return buf, false
			}
			buf = append(buf, '\n')
		}
	}
	return buf, true
}

func appendIndent(buf []byte, n int) []byte {
	for range n {
		buf = append(buf, ' ')
	}
	return buf
}

// appendYAMLScalar writes a scalar value as the encoder does; a number is
// written as yamlValue converts it.
func appendYAMLScalar(buf []byte, v any) ([]byte, bool) {
	switch t := v.(type) {
	case json.Number:
		if i, err := strconv.ParseInt(string(t), 10, 64); err == nil {
			return strconv.AppendInt(buf, i, 10), true
		}
		if u, err := strconv.ParseUint(string(t), 10, 64); err == nil {
			return strconv.AppendUint(buf, u, 10), true
		}
		f, err := strconv.ParseFloat(string(t), 64)
		if err != nil {
			return buf, false
		}
		return appendYAMLScalar(buf, f)
	case nil:
		return append(buf, "null"...), true
	case bool:
		return strconv.AppendBool(buf, t), true
	case int:
		return strconv.AppendInt(buf, int64(t), 10), true
	case uint64:
		return strconv.AppendUint(buf, t, 10), true
	case float64:
		s := strconv.FormatFloat(t, 'g', -1, 64)
		switch s {
		case "+Inf", "-Inf", "NaN":
			return buf, false
		}
		return append(buf, s...), true
	case string:
		return appendYAMLString(buf, t, false)
	}
	return buf, false
}

// appendYAMLString writes s as the encoder writes a string: plain unless it
// would read back as another type (then double-quoted), when that is
// certain. A key is never folded; a plain value with spaces is written only
// if its line stays within the emitter's 80 columns, where it never folds.
func appendYAMLString(buf []byte, s string, key bool) ([]byte, bool) {
	if s == "" {
		return append(buf, `""`...), true
	}
	spaces := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e {
			return buf, false
		}
		if c == ' ' {
			spaces = true
		}
	}
	if yamlResolvesToString(s) && !yamlBase60Float(s) {
		if !yamlBlockPlainAllowed(s) {
			return buf, false // the emitter single-quotes it
		}
		if spaces && !key {
			col := len(buf) - bytes.LastIndexByte(buf, '\n') - 1
			if col+len(s) > 80 {
				return buf, false
			}
		}
		return append(buf, s...), true
	}
	if spaces {
		return buf, false // a double-quoted scalar folds at spaces
	}
	buf = append(buf, '"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			buf = append(buf, '\\')
		}
		buf = append(buf, s[i])
	}
	return append(buf, '"'), true
}

// yamlBlockPlainAllowed is the emitter's analysis of a printable ASCII
// scalar without line breaks: whether a plain scalar may hold it in block
// context.
func yamlBlockPlainAllowed(s string) bool {
	if s[0] == ' ' || s[len(s)-1] == ' ' {
		return false
	}
	if strings.HasPrefix(s, "---") || strings.HasPrefix(s, "...") {
		return false
	}
	blankAfter := func(i int) bool { return i+1 >= len(s) || s[i+1] == ' ' }
	switch s[0] {
	case '#', ',', '[', ']', '{', '}', '&', '*', '!', '|', '>', '\'', '"', '%', '@', '`':
		return false
	case '?', ':', '-':
		if blankAfter(0) {
			return false
		}
	}
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case ':':
			if blankAfter(i) {
				return false
			}
		case '#':
			if s[i-1] == ' ' {
				return false
			}
		}
	}
	return true
}

// yamlSpecial are the plain scalars yaml/v2 reads as a bool, null or float
// (its merge key "<<" starts with a rune it never looks up).
var yamlSpecial = map[string]bool{
	"y": true, "Y": true, "yes": true, "Yes": true, "YES": true,
	"true": true, "True": true, "TRUE": true,
	"on": true, "On": true, "ON": true,
	"n": true, "N": true, "no": true, "No": true, "NO": true,
	"false": true, "False": true, "FALSE": true,
	"off": true, "Off": true, "OFF": true,
	"~": true, "null": true, "Null": true, "NULL": true,
	".nan": true, ".NaN": true, ".NAN": true,
	".inf": true, ".Inf": true, ".INF": true,
	"+.inf": true, "+.Inf": true, "+.INF": true,
	"-.inf": true, "-.Inf": true, "-.INF": true,
}

var (
	yamlStyleFloat = regexp.MustCompile(`^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`)
	yamlBase60     = regexp.MustCompile(`^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$`)
)

// yamlResolvesToString is yaml/v2's resolve of a non-empty plain scalar:
// whether it reads back as a string (else the encoder quotes it).
func yamlResolvesToString(s string) bool {
	if yamlSpecial[s] {
		return false
	}
	switch c := s[0]; {
	case c == '.':
		_, err := strconv.ParseFloat(s, 64)
		return err != nil
	case c == '+' || c == '-' || c >= '0' && c <= '9':
		if yamlTimestamp(s) {
			return false
		}
		plain := strings.ReplaceAll(s, "_", "")
		if _, err := strconv.ParseInt(plain, 0, 64); err == nil {
			return false
		}
		if _, err := strconv.ParseUint(plain, 0, 64); err == nil {
			return false
		}
		if yamlStyleFloat.MatchString(plain) {
			if _, err := strconv.ParseFloat(plain, 64); err == nil {
				return false
			}
		}
		if rest, ok := strings.CutPrefix(plain, "0b"); ok {
			if _, err := strconv.ParseInt(rest, 2, 64); err == nil {
				return false
			}
			if _, err := strconv.ParseUint(rest, 2, 64); err == nil {
				return false
			}
		} else if rest, ok := strings.CutPrefix(plain, "-0b"); ok {
			if _, err := strconv.ParseInt("-"+rest, 2, 64); err == nil {
				return false
			}
		}
	}
	return true
}

// yamlTimestamp is yaml/v2's parseTimestamp: whether a plain scalar reads
// back as a timestamp.
func yamlTimestamp(s string) bool {
	i := 0
	for ; i < len(s); i++ {
		if c := s[i]; c < '0' || c > '9' {
			break
		}
	}
	if i != 4 || i == len(s) || s[i] != '-' {
		return false
	}
	for _, format := range []string{"2006-1-2T15:4:5.999999999Z07:00", "2006-1-2t15:4:5.999999999Z07:00", "2006-1-2 15:4:5.999999999", "2006-1-2"} {
		if _, err := time.Parse(format, s); err == nil {
			return true
		}
	}
	return false
}

// yamlBase60Float: the encoder quotes YAML 1.1 base 60 floats.
func yamlBase60Float(s string) bool {
	c := s[0]
	signOrDigit := c == '+' || c == '-' || c >= '0' && c <= '9'
	if !signOrDigit || strings.IndexByte(s, ':') < 0 {
		return false
	}
	return yamlBase60.MatchString(s)
}

// yamlKeyLess is the order in which yaml/v2 writes the string keys of a
// map: runs of digits compare as numbers, letters after other runes.
func yamlKeyLess(a, b string) bool {
	if isASCII(a) && isASCII(b) {
		return keyLess(a, b, func(s string, i int) rune { return rune(s[i]) }, len(a), len(b))
	}
	ar, br := []rune(a), []rune(b)
	return keyLess(ar, br, func(s []rune, i int) rune { return s[i] }, len(ar), len(br))
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// keyLess is yaml/v2's keyList.Less on two strings as runes: at(a, i) is
// the i-th rune of a, of na.
func keyLess[S any](a, b S, at func(S, int) rune, na, nb int) bool {
	for i := 0; i < na && i < nb; i++ {
		ai, bi := at(a, i), at(b, i)
		if ai == bi {
			continue
		}
		al := unicode.IsLetter(ai)
		bl := unicode.IsLetter(bi)
		if al && bl {
			return ai < bi
		}
		if al || bl {
			return bl
		}
		var aj, bj int
		var an, bn int64
		if ai == '0' || bi == '0' {
			for j := i - 1; j >= 0 && unicode.IsDigit(at(a, j)); j-- {
				if at(a, j) != '0' {
					an = 1
					bn = 1
					break
				}
			}
		}
		for aj = i; aj < na && unicode.IsDigit(at(a, aj)); aj++ {
			an = an*10 + int64(at(a, aj)-'0')
		}
		for bj = i; bj < nb && unicode.IsDigit(at(b, bj)); bj++ {
			bn = bn*10 + int64(at(b, bj)-'0')
		}
		if an != bn {
			return an < bn
		}
		if aj != bj {
			return aj < bj
		}
		return ai < bi
	}
	return na < nb
}
