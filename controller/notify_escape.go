package controller

// Tenant text in notifications: an Event's message carries version and
// directory names, check messages, a requester's reason; the object a
// template reads (.obj) is the tenant's own. A chat service reads some of
// that text as markup: Slack's <!channel> pings everyone and
// <https://evil|the runbook> hides a link behind any words; Mattermost
// and Discord ping on @here, @channel, @everyone; markdown renders
// [the runbook](https://evil). Every string a tenant controls is made
// inert for the service it goes to before any template reads it, here,
// one function per format: the platform's templates (their own markup)
// are not touched.

import (
	"strings"
	"unicode"
)

// escaperFor is how tenant text is made inert for a notifications-engine
// service type (service.<type>[.<name>] in the ConfigMap), or "flux" for
// Flux's notification-controller.
func escaperFor(serviceType string) func(string) string {
	switch serviceType {
	case "slack", "teams":
		// Slack's mrkdwn, and Teams' MessageCard text, read &, < and > as
		// markup and render their HTML entities as the characters.
		return escapeEntities
	case "mattermost", "rocketchat", "googlechat", "telegram", "webex", "email", "pushover":
		// Chat and mail bodies, several lines to a message: no entities
		// (they would show as written).
		return escapeLines
	}
	// The generic webhook (a JSON body, usually), Flux's
	// notification-controller (whose Provider, unknown here, may be Slack,
	// Discord, Teams or a commit status) and any other: one line, no
	// markup of any of them.
	return escapeOneLine
}

// escapeEntities is s for Slack's mrkdwn (and Teams): &, < and > as
// Slack's formatting rules ask (&amp; &lt; &gt;), which also keeps
// <!here>, <@U…> and <url|text> from being read; mentions and markdown
// links broken; control characters dropped but for new lines and tabs.
func escapeEntities(s string) string {
	s = controls(s, false)
	s = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
	return mentions(s)
}

// escapeLines is s for a format whose entities are not decoded: < and >
// become look-alikes (‹ ›) that no chat service reads as markup;
// mentions and markdown links broken; control characters dropped but for
// new lines and tabs.
func escapeLines(s string) string {
	return mentions(lookAlikes(controls(s, false)))
}

// escapeOneLine is escapeLines on one line: new lines and tabs become
// spaces too, so that no line of a line-oriented body is the tenant's.
func escapeOneLine(s string) string {
	return mentions(lookAlikes(controls(s, true)))
}

func lookAlikes(s string) string {
	return strings.NewReplacer("<", "‹", ">", "›").Replace(s)
}

// zwsp, invisible, breaks a keyword or a markup sequence it is put in.
const zwsp = "\u200b"

// mentions breaks the mentions of a whole channel (@here, @channel,
// @everyone, @all, in any case) and markdown's links ([text](url)) with
// a zero-width space, so they read the same and do nothing.
func mentions(s string) string {
	if !strings.ContainsAny(s, "@]") {
		return s
	}
	// The words after @ that ping a channel or everyone.
	words := [...]string{"here", "channel", "everyone", "all"}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		b.WriteByte(s[i])
		switch s[i] {
		case '@':
			for _, w := range words {
				if len(s)-i-1 >= len(w) && strings.EqualFold(s[i+1:i+1+len(w)], w) {
					b.WriteString(zwsp)
					break
				}
			}
		case ']':
			if i+1 < len(s) && s[i+1] == '(' {
				b.WriteString(zwsp)
			}
		}
	}
	return b.String()
}

// controls drops control characters, Unicode's bidirectional overrides
// (which show text in another order than it is read) and line separators;
// new lines and tabs stay unless oneLine, and become spaces then (a
// carriage return is dropped, or a space).
func controls(s string, oneLine bool) string {
	clean := true
	for _, r := range s {
		if r > unicode.MaxASCII || r < ' ' || r == 0x7f {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\t':
			if oneLine {
				return ' '
			}
			return r
		case r == '\r':
			if oneLine {
				return ' '
			}
			return -1
		case r == '\u2028' || r == '\u2029':
			if oneLine {
				return ' '
			}
			return '\n'
		case unicode.IsControl(r), r >= '\u202a' && r <= '\u202e', r >= '\u2066' && r <= '\u2069', r == '\u200e', r == '\u200f', r == '\u061c':
			return -1
		}
		return r
	}, s)
}

// escapeTree is v with every string in it (map values and list items,
// not map keys) escaped by esc: the template variables of one send.
func escapeTree(v any, esc func(string) string) any {
	switch t := v.(type) {
	case string:
		return esc(t)
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[k] = escapeTree(x, esc)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = escapeTree(x, esc)
		}
		return out
	}
	return v
}
