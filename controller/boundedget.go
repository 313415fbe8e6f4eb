package controller

import (
	"context"
	"io"
	"net/http"
	"time"
)

// boundedGet GETs url with hc, asking for JSON, within timeout, and reads
// at most limit+1 bytes of the answer: a body longer than limit tells the
// caller the answer was cut. The transport's error is returned as it is
// (a *url.Error names the URL, credentials included: callers that name
// it redact it). It is the one read of an HTTP API the controllers do on
// a tenant's behalf: a target cluster's API server, Testkube's API.
func boundedGet(ctx context.Context, hc *http.Client, url string, timeout time.Duration, limit int64) (status int, reason string, body []byte, err error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err = io.ReadAll(io.LimitReader(resp.Body, limit+1))
	return resp.StatusCode, resp.Status, body, err
}
