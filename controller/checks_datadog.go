package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// defaultDatadogAddress is Datadog's US1 site; other sites set address.
const defaultDatadogAddress = "https://api.datadoghq.com"

// datadogAnswer is the part of Datadog's metrics query answer
// (GET /api/v1/query) a check reads.
type datadogAnswer struct {
	Status string `json:"status"`
	Error  string `json:"error"`
	Series []struct {
		// Pointlist holds [timestamp in ms, value] pairs; a value may be null.
		Pointlist [][]*float64 `json:"pointlist"`
	} `json:"series"`
}

// datadog runs a metrics query over the last window (5m by default), as
// Flagger's and Argo Rollouts' Datadog providers do; the value is the last
// point of the first series.
func (c *Checker) datadog(ctx context.Context, w *scribev1.Workload, p probe, now time.Time) (measurement, error) {
	ch := p.check
	if ch.Query == "" || ch.SecretRef == nil {
		return measurement{}, errors.New("a datadog check needs query and secretRef")
	}
	address := ch.Address
	if address == "" {
		address = defaultDatadogAddress
	}
	if err := ValidatePrometheusAddress(address); err != nil {
		return measurement{}, fmt.Errorf("address %w", err)
	}
	e, err := c.endpoint(ctx, w, p, address)
	if err != nil {
		return measurement{}, err
	}
	apiKey, appKey := strings.TrimSpace(string(e.secret["api-key"])), strings.TrimSpace(string(e.secret["app-key"]))
	if apiKey == "" || appKey == "" {
		return measurement{}, fmt.Errorf("%s.secretRef: secret %s needs the keys api-key and app-key", p.field, ch.SecretRef.Name)
	}
	window := 5 * time.Minute
	if ch.Window != nil && ch.Window.Duration > 0 {
		window = ch.Window.Duration
	}
	q := url.Values{}
	q.Set("from", strconv.FormatInt(now.Add(-window).Unix(), 10))
	q.Set("to", strconv.FormatInt(now.Unix(), 10))
	q.Set("query", ch.Query)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(address, "/")+"/api/v1/query?"+q.Encode(), nil)
	if err != nil {
		return measurement{}, fmt.Errorf("address: %s", remoteText(err.Error()))
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("DD-API-KEY", apiKey)
	req.Header.Set("DD-APPLICATION-KEY", appKey)
	body, err := e.do(ctx, req)
	if err != nil {
		return measurement{}, fmt.Errorf("query %s: %w", address, err)
	}
	var ans datadogAnswer
	if err := json.Unmarshal(body, &ans); err != nil {
		return measurement{}, fmt.Errorf("query %s: the answer is not Datadog's: %s", address, remoteText(err.Error()))
	}
	if ans.Status == "error" || ans.Error != "" {
		return measurement{}, fmt.Errorf("query %s: %s", address, remoteText(ans.Error))
	}
	v, found := 0.0, false
	if len(ans.Series) > 0 {
		pts := ans.Series[0].Pointlist
		for j := len(pts) - 1; j >= 0; j-- {
			if len(pts[j]) == 2 && pts[j][1] != nil {
				v, found = *pts[j][1], true
				break
			}
		}
	}
	return measured(ch.Query, v, found), nil
}
