// Package termtext makes text from tenants (names, reasons, messages,
// commit messages, file names read from a repository) safe for the sinks
// the CLI prints to, one rule per sink:
//
//   - Line, for a terminal or a plain-text line: every control character
//     (C0, tab and newline included, DEL, C1), format character
//     (bidirectional embeddings, overrides and isolates U+202A–U+202E,
//     U+2066–U+2069, zero-width characters), line or paragraph separator,
//     and every byte of invalid UTF-8 is written as a visible Go escape
//     (\x1b, \n, \u202e, \xff). The result holds no line break, so no
//     escape sequence, no carriage return and no extra line.
//   - Cell, for a table cell: Line's rule, so a cell never holds a newline
//     (a new row) or a tab (tabwriter's column separator).
//   - CILine, for a line of a CI log: Line's rule, and no tenant text reads
//     as a workflow command: a line starting with "::" (after spaces,
//     which GitHub Actions trims) has its first colon escaped, and "##["
//     or "##vso[" anywhere has its bracket escaped.
//   - JSON, for encoding/json output: the characters above that the
//     encoder leaves raw (DEL, C1, format characters) are written as \u
//     escapes, which decode to the same string, so no data is lost.
//
// A backslash is kept as is: a tenant's literal "\x1b" reads like an
// escaped ESC, but neither reaches the terminal as a control.
package termtext

import (
	"bytes"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Unsafe says r must not reach a terminal or log as is: a control
// character, a format character (which includes the bidirectional
// controls) or a line or paragraph separator.
func Unsafe(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || unicode.In(r, unicode.Zl, unicode.Zp)
}

// Line is s with every unsafe character and every byte of invalid UTF-8
// written as a visible Go escape: s made safe for one terminal line.
func Line(s string) string {
	if safe(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteString(`\x`)
			b.WriteString(strconv.FormatUint(uint64(s[i])|0x100, 16)[1:])
		case Unsafe(r):
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// safe says s holds nothing Line escapes.
func safe(s string) bool {
	for _, r := range s {
		if r == utf8.RuneError || Unsafe(r) {
			return false
		}
	}
	return true
}

// Cell is s for a table cell: Line(s), which holds no newline and no tab.
func Cell(s string) string { return Line(s) }

// CILine is s for one line of a CI log: Line(s), with a leading "::"
// (after whitespace) written as `\x3a:` and the "[" of "##[" or "##vso["
// as `\x5b`, so GitHub Actions and Azure Pipelines do not read the line
// as a workflow command.
func CILine(s string) string {
	s = Line(s)
	if rest := strings.TrimLeftFunc(s, unicode.IsSpace); strings.HasPrefix(rest, "::") {
		s = s[:len(s)-len(rest)] + `\x3a` + rest[1:]
	}
	if !strings.Contains(s, "##") {
		return s
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "##")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i+2])
		s = s[i+2:]
		// "##[" or "##vso[" (Azure Pipelines reads it in any case).
		n := 0
		if len(s) >= 3 && strings.EqualFold(s[:3], "vso") {
			n = 3
		}
		if len(s) > n && s[n] == '[' {
			b.WriteString(s[:n])
			b.WriteString(`\x5b`)
			s = s[n+1:]
		}
	}
}

// CIText is text of several lines for a CI log: each line made safe by
// CILine, the newlines between them kept.
func CIText(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = CILine(l)
	}
	return strings.Join(lines, "\n")
}

// JSON is encoding/json's output b with every unsafe character it leaves
// raw (DEL, C1, format characters, line and paragraph separators) written
// as a \u escape, surrogate pairs above U+FFFF. JSON's structure is ASCII,
// so such a character is inside a string, where the escape decodes to
// the same character.
func JSON(b []byte) []byte {
	if !bytes.ContainsFunc(b, Unsafe) {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if size == 1 && r == utf8.RuneError || !Unsafe(r) || r < 0x20 {
			// Invalid bytes and C0 controls: encoding/json never writes
			// them raw inside a string; kept as they are elsewhere.
			out = append(out, b[i:i+size]...)
			i += size
			continue
		}
		if r > 0xFFFF {
			r1, r2 := utf16.EncodeRune(r)
			out = appendU(appendU(out, r1), r2)
		} else {
			out = appendU(out, r)
		}
		i += size
	}
	return out
}

func appendU(out []byte, r rune) []byte {
	out = append(out, `\u`...)
	return append(out, strconv.FormatUint(uint64(r)|0x10000, 16)[1:]...)
}
