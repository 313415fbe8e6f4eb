package gitsink

import (
	"strings"
)

// Text that did not come from Scribe's own wording (check messages, a
// provider's answer, names and paths from a render, promotion evidence)
// reaches a pull request body only through these functions, so it renders
// as the text it is: it can add no heading, link, image, HTML, table cell
// or "Approved by" line of its own.

// mdInline are the characters that start or delimit an inline construct
// anywhere on a line: emphasis, code, links and images, HTML and entities,
// autolinks, table cells, strike-through, headings.
const mdInline = "\\`*_{}[]<>#|!~&:"

// mdLineStart are the characters that start a block (list item, heading
// underline) only at the start of a line. Scribe writes mdText after its
// own words on a line; a leading marker is escaped all the same.
const mdLineStart = "-+="

// mdText escapes s for Markdown's inline text: every character that can
// start a construct is backslash-escaped and line breaks become spaces, so
// s stays one run of literal text inside Scribe's own line.
func mdText(s string) string {
	var b strings.Builder
	b.Grow(len(s) + len(s)/4)
	for i, r := range s {
		switch {
		case r == '\n' || r == '\r':
			b.WriteByte(' ')
		case strings.ContainsRune(mdInline, r), i == 0 && strings.ContainsRune(mdLineStart, r):
			b.WriteByte('\\')
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// mdCode is s as an inline code span: fenced by one more backtick than the
// longest run of backticks in s, padded when s starts or ends with one,
// and on one line.
func mdCode(s string) string {
	s = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(s)
	fence := strings.Repeat("`", longestRun(s, '`')+1)
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		s = " " + s + " "
	}
	return fence + s + fence
}

// mdCell makes s safe inside a table cell: a pipe, even in a code span,
// ends the cell unless escaped (GitHub Flavored Markdown, tables).
func mdCell(s string) string {
	return strings.ReplaceAll(s, "|", "\\|")
}

// mdBlock is s as a fenced code block: the fence is longer than any run
// of backticks in s, so nothing in s can close it and everything in it is
// shown verbatim.
func mdBlock(s string) string {
	n := longestRun(s, '`') + 1
	if n < 3 {
		n = 3
	}
	fence := strings.Repeat("`", n)
	return fence + "text\n" + s + "\n" + fence + "\n"
}

func longestRun(s string, c byte) int {
	longest, cur := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			cur++
			if cur > longest {
				longest = cur
			}
		} else {
			cur = 0
		}
	}
	return longest
}
