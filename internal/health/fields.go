package health

import (
	"math"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Tolerant accessors for unstructured content: a missing field, a nil map or
// a value of the wrong type reads as the zero value, never as a panic.

func field(obj map[string]any, path ...string) (any, bool) {
	var cur any = obj
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		cur, ok = m[p]
		if !ok {
			return nil, false
		}
	}
	return cur, true
}

func str(obj map[string]any, path ...string) string {
	v, _ := field(obj, path...)
	s, _ := v.(string)
	return s
}

func obj(o map[string]any, path ...string) map[string]any {
	v, _ := field(o, path...)
	m, _ := v.(map[string]any)
	return m
}

func list(o map[string]any, path ...string) []any {
	v, _ := field(o, path...)
	l, _ := v.([]any)
	return l
}

func strs(o map[string]any, path ...string) []string {
	var out []string
	for _, e := range list(o, path...) {
		if s, ok := e.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// integer reads an integer field written by JSON decoding (int64 or float64)
// or by hand (int, int32).
func integer(o map[string]any, path ...string) (int64, bool) {
	v, ok := field(o, path...)
	if !ok {
		return 0, false
	}
	switch n := v.(type) {
	case int64:
		return n, true
	case int:
		return int64(n), true
	case int32:
		return int64(n), true
	case float64:
		if n != math.Trunc(n) || n > math.MaxInt64 || n < math.MinInt64 {
			return 0, false
		}
		return int64(n), true
	}
	return 0, false
}

// cond is a status condition in either the metav1.Condition shape or the
// older shape (with severity, without observedGeneration).
type cond struct {
	Type, Status, Reason, Message string
	ObservedGeneration            int64
}

// conditions reads the condition list at path; entries that are not objects
// are skipped.
func conditions(o map[string]any, path ...string) []cond {
	var out []cond
	for _, e := range list(o, path...) {
		m, ok := e.(map[string]any)
		if !ok {
			continue
		}
		g, _ := integer(m, "observedGeneration")
		out = append(out, cond{
			Type:               str(m, "type"),
			Status:             str(m, "status"),
			Reason:             str(m, "reason"),
			Message:            str(m, "message"),
			ObservedGeneration: g,
		})
	}
	return out
}

func findCond(cs []cond, typ string) *cond {
	for i := range cs {
		if cs[i].Type == typ {
			return &cs[i]
		}
	}
	return nil
}

// content returns the object's content, or nil for a nil object.
func content(u *unstructured.Unstructured) map[string]any {
	if u == nil {
		return nil
	}
	return u.Object
}

// identity returns group, kind and the Verdict subject of u, read tolerantly.
func identity(u *unstructured.Unstructured) (group, kind, subj string) {
	o := content(u)
	apiVersion := str(o, "apiVersion")
	if i := strings.IndexByte(apiVersion, '/'); i >= 0 {
		group = apiVersion[:i]
	}
	kind = str(o, "kind")
	k := kind
	if k == "" {
		k = "Object"
	}
	return group, kind, subject(k, str(o, "metadata", "namespace"), str(o, "metadata", "name"))
}
