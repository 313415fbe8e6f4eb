package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// prometheus runs an instant query through Prometheus's own API client;
// the value is the first sample of the answer.
func (c *Checker) prometheus(ctx context.Context, w *scribev1.Workload, p probe) (measurement, error) {
	ch := p.check
	if ch.Address == "" || ch.Query == "" {
		return measurement{}, errors.New("a prometheus check needs address and query")
	}
	if err := ValidatePrometheusAddress(ch.Address); err != nil {
		return measurement{}, fmt.Errorf("address %w", err)
	}
	e, err := c.endpoint(ctx, w, p, ch.Address)
	if err != nil {
		return measurement{}, err
	}
	api, err := promapi.NewClient(promapi.Config{Address: ch.Address, Client: e.client})
	if err != nil {
		return measurement{}, fmt.Errorf("address: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	val, _, err := promv1.NewAPI(api).Query(ctx, ch.Query, time.Time{})
	if err != nil {
		return measurement{}, fmt.Errorf("query %s: %s", ch.Address, queryError(err))
	}
	return measurement{asked: ch.Query, found: hasSample(val), raw: result(val), number: func() (float64, bool, error) {
		v, ok := firstSample(val)
		return v, ok, nil
	}}, nil
}

// hasSample says an answer holds a value: a scalar, or a vector with a sample.
func hasSample(v model.Value) bool {
	_, ok := firstSample(v)
	return ok
}

// result is an answer as Argo Rollouts' conditions see it: a scalar's
// value, or a vector's values in order.
func result(v model.Value) any {
	switch r := v.(type) {
	case *model.Scalar:
		return float64(r.Value)
	case model.Vector:
		out := make([]float64, len(r))
		for i, s := range r {
			out[i] = float64(s.Value)
		}
		return out
	}
	return nil
}

// firstSample is the value of a scalar, or of a vector's first sample.
func firstSample(v model.Value) (float64, bool) {
	switch r := v.(type) {
	case *model.Scalar:
		return float64(r.Value), true
	case model.Vector:
		if len(r) > 0 {
			return float64(r[0].Value), true
		}
	}
	return 0, false
}

// queryError says what went wrong with a query; the server's own words
// (an error field, a status text) only as a quoted excerpt.
func queryError(err error) string {
	var apiErr *promv1.Error
	if errors.As(err, &apiErr) {
		return fmt.Sprintf("%s: %s", apiErr.Type, remoteText(apiErr.Msg))
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("no answer within %s", queryTimeout)
	}
	return remoteText(err.Error())
}
