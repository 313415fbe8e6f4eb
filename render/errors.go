package render

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"cuelang.org/go/cue/errors"
)

// FieldError is one problem with the custom resource, at a path of the CR
// (for example `spec.versions[1].scaling.hpa`).
type FieldError struct {
	Path    string
	Message string
}

func (e FieldError) Error() string {
	if e.Path == "" {
		return e.Message
	}
	return e.Path + ": " + e.Message
}

// InputError lists every problem found in a custom resource. The render
// reports all of them at once rather than the first.
type InputError struct {
	// Object names the custom resource: Kind/namespace/name.
	Object string
	Errors []FieldError
}

func (e *InputError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s is invalid:", e.Object)
	for _, fe := range e.Errors {
		b.WriteString("\n  ")
		b.WriteString(fe.Error())
	}
	return b.String()
}

// cuePathToField turns CUE path selectors of the input into a CR field path:
// [input spec versions 1 scaling] → spec.versions[1].scaling.
func cuePathToField(sel []string, prefix string) string {
	var b strings.Builder
	b.WriteString(prefix)
	for _, s := range sel {
		s = strings.Trim(s, `"`)
		if _, err := strconv.Atoi(s); err == nil {
			b.WriteString("[" + s + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(s)
	}
	return b.String()
}

// cueFieldErrors converts a CUE error into field errors whose paths start at
// prefix (a CR field path) after dropping the first `strip` selectors of the
// CUE path. Duplicates — CUE repeats a conflict once per disjunct — are
// dropped, and the rest sorted by path.
func cueFieldErrors(err error, strip int, prefix string) []FieldError {
	seen := map[string]bool{}
	var out []FieldError
	for _, e := range errors.Errors(err) {
		sel := e.Path()
		if len(sel) >= strip {
			sel = sel[strip:]
		}
		// Paths into a catalog entry's parameter schema start at the schema.
		for i := len(sel) - 1; i >= 0; i-- {
			if strings.HasPrefix(sel[i], "#") {
				sel = sel[i+1:]
				break
			}
		}
		format, args := e.Msg()
		msg := fmt.Sprintf(format, args...)
		fe := FieldError{Path: cuePathToField(sel, prefix), Message: msg}
		key := fe.Error()
		if seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, fe)
	}
	// A disjunction failure is reported as a summary ("N errors in empty
	// disjunction") plus one conflict per alternative. Keep, per path, the
	// alternatives' bound violations and drop the summary and the plain
	// "conflicting values" lines when a more specific message exists.
	disjunct := map[string]bool{}
	specific := map[string]bool{}
	for _, fe := range out {
		if strings.Contains(fe.Message, "empty disjunction") {
			disjunct[fe.Path] = true
		} else if !strings.HasPrefix(fe.Message, "conflicting values") {
			specific[fe.Path] = true
		}
	}
	filtered := out[:0]
	for _, fe := range out {
		if disjunct[fe.Path] && strings.Contains(fe.Message, "empty disjunction") && len(out) > 1 {
			continue
		}
		if disjunct[fe.Path] && specific[fe.Path] && strings.HasPrefix(fe.Message, "conflicting values") {
			continue
		}
		filtered = append(filtered, fe)
	}
	sort.SliceStable(filtered, func(i, j int) bool { return filtered[i].Path < filtered[j].Path })
	return filtered
}
