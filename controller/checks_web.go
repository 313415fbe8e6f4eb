package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"k8s.io/client-go/util/jsonpath"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// web reads a JSON answer from the check's URL (GET, as Argo Rollouts'
// web provider does) and takes the value its JSONPath selects.
func (c *Checker) web(ctx context.Context, w *scribev1.Workload, p probe, version string) (measurement, error) {
	ch := p.check
	if ch.URL == "" || ch.JSONPath == "" {
		return measurement{}, errors.New("a web check needs url and jsonPath")
	}
	if err := ValidateJSONPath(ch.JSONPath); err != nil {
		return measurement{}, fmt.Errorf("%s.jsonPath: %w", p.field, err)
	}
	u, err := QueryFor(ch.URL, w, version)
	if err != nil {
		return measurement{}, fmt.Errorf("url: %w", err)
	}
	if err := validateCheckURL(u, true); err != nil {
		return measurement{}, fmt.Errorf("url %w", err)
	}
	// The Secret is bound to where the request goes: the URL without its query.
	where := u
	if j := strings.IndexByte(where, '?'); j >= 0 {
		where = where[:j]
	}
	e, err := c.endpoint(ctx, w, p, where)
	if err != nil {
		return measurement{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return measurement{}, fmt.Errorf("url: %s", remoteText(err.Error()))
	}
	req.Header.Set("Accept", "application/json")
	body, err := e.do(ctx, req)
	if err != nil {
		return measurement{}, fmt.Errorf("GET %s: %w", redactQuery(u), err)
	}
	v, found, err := selectValue(body, ch.JSONPath)
	if err != nil {
		return measurement{}, fmt.Errorf("GET %s: %w", redactQuery(u), err)
	}
	return measurement{asked: ch.JSONPath + " of " + redactQuery(u), found: found, raw: v, number: func() (float64, bool, error) {
		return number(v, ch.JSONPath)
	}}, nil
}

// selectValue is the first value path selects in the JSON document doc
// (numbers as float64); found is false when path selects nothing or null.
func selectValue(doc []byte, path string) (any, bool, error) {
	var data any
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	if err := dec.Decode(&data); err != nil {
		return nil, false, fmt.Errorf("the answer is not JSON: %s", remoteText(err.Error()))
	}
	return selectIn(data, path)
}

// A check's JSONPath is written by the Workload's or the template's
// writer and walks an answer from a server they may own: client-go's
// evaluator has no bound of its own. Recursive descent (`..`) and unions
// (`[a,b]`) repeat the walk, so `{..a..a..a..a}` walks a 40 KB answer
// billions of times; a range (`{range}`) does too. Without them, each
// step of a path reads each value of the answer at most once (each step
// moves one level down, a filter reads each element's own subtree), so
// the walk is at most the path's nodes times the answer's values, which
// maxJSONPathWork bounds before it starts.
const maxJSONPathWork = 16 << 20

// ValidateJSONPath says why path cannot be a check's JSONPath, or nil:
// it does not parse, or it uses recursive descent, a union or a range.
func ValidateJSONPath(path string) error {
	_, err := jsonPathNodes(path)
	return err
}

// jsonPathNodes is the number of nodes of path, once it is known to walk
// an answer at most once per node.
func jsonPathNodes(path string) (int, error) {
	parsed, err := jsonpath.Parse("check", path)
	if err != nil {
		return 0, fmt.Errorf("%q does not parse: %s", path, remoteText(err.Error()))
	}
	n := 0
	var walk func(node jsonpath.Node) error
	walk = func(node jsonpath.Node) error {
		n++
		switch x := node.(type) {
		case *jsonpath.ListNode:
			for _, c := range x.Nodes {
				if err := walk(c); err != nil {
					return err
				}
			}
		case *jsonpath.FilterNode:
			if err := walk(x.Left); err != nil {
				return err
			}
			return walk(x.Right)
		case *jsonpath.RecursiveNode:
			return fmt.Errorf("%q uses recursive descent (..), which walks the whole answer once per use; name the path to the value", path)
		case *jsonpath.UnionNode:
			return fmt.Errorf("%q uses a union (,), which walks the answer once per member; use one check per value", path)
		case *jsonpath.IdentifierNode:
			return fmt.Errorf("%q uses %s, which walks the answer once per element; select one value", path, x.Name)
		}
		return nil
	}
	if err := walk(parsed.Root); err != nil {
		return 0, err
	}
	return n, nil
}

// countValues is the number of values in decoded JSON, counted up to limit.
func countValues(v any, limit int) int {
	n := 0
	var walk func(v any)
	walk = func(v any) {
		n++
		switch x := v.(type) {
		case []any:
			for _, e := range x {
				if n > limit {
					return
				}
				walk(e)
			}
		case map[string]any:
			for _, e := range x {
				if n > limit {
					return
				}
				walk(e)
			}
		}
	}
	walk(v)
	return n
}

// selectIn is selectValue over decoded JSON.
func selectIn(data any, path string) (any, bool, error) {
	nodes, err := jsonPathNodes(path)
	if err != nil {
		return nil, false, fmt.Errorf("jsonPath %w", err)
	}
	if values := countValues(data, maxJSONPathWork/nodes); nodes*values > maxJSONPathWork {
		return nil, false, fmt.Errorf("jsonPath %q: walking an answer of more than %d values with a path of %d nodes exceeds the bound of %d steps", path, maxJSONPathWork/nodes, nodes, maxJSONPathWork)
	}
	jp := jsonpath.New("check")
	if err := jp.Parse(path); err != nil {
		return nil, false, fmt.Errorf("jsonPath %q: %s", path, remoteText(err.Error()))
	}
	jp.AllowMissingKeys(true)
	results, err := jp.FindResults(data)
	if err != nil {
		return nil, false, fmt.Errorf("jsonPath %q: %s", path, remoteText(err.Error()))
	}
	for _, rs := range results {
		for _, r := range rs {
			if !r.IsValid() || !r.CanInterface() {
				continue
			}
			v := plain(r.Interface())
			return v, v != nil, nil
		}
	}
	return nil, false, nil
}

// plain is decoded JSON with its numbers as float64, as conditions see it.
func plain(v any) any {
	switch x := v.(type) {
	case json.Number:
		if f, err := x.Float64(); err == nil {
			return f
		}
		return x.String()
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = plain(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = plain(e)
		}
		return out
	}
	return v
}

// number is a JSON value as a number: a number, a numeric string or a
// boolean (1 or 0); null is no value.
func number(v any, path string) (float64, bool, error) {
	switch x := v.(type) {
	case nil:
		return 0, false, nil
	case float64:
		return x, true, nil
	case string:
		f, err := strconv.ParseFloat(x, 64)
		if err != nil {
			return 0, false, fmt.Errorf("jsonPath %q selects %s, not a number", path, remoteText(x))
		}
		return f, true, nil
	case bool:
		if x {
			return 1, true, nil
		}
		return 0, true, nil
	}
	return 0, false, fmt.Errorf("jsonPath %q selects a %T, not a number", path, v)
}

// redactQuery is u without its query, for messages.
func redactQuery(u string) string {
	if i := strings.IndexByte(u, '?'); i >= 0 {
		return u[:i] + "?…"
	}
	return u
}
