// Package textcut cuts text to a byte budget on a character boundary, so
// a cut never splits a UTF-8 sequence: the controller's quoted remote
// excerpts and check messages, and the pull request's evidence. It
// imports nothing of Scribe, so every layer may use it.
package textcut

import "unicode/utf8"

// Prefix is the longest prefix of s of at most n bytes (none for n <= 0)
// that does not end inside a character.
func Prefix(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Ellipsis is s when it holds at most n bytes, else Prefix(s, n) and "…".
func Ellipsis(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return Prefix(s, n) + "…"
}
