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

// selectIn is selectValue over decoded JSON.
func selectIn(data any, path string) (any, bool, error) {
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
