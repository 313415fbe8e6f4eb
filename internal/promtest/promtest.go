// Package promtest serves the Prometheus HTTP API's instant queries
// (/api/v1/query, GET or form POST) on 127.0.0.1 for tests, evaluated by
// Prometheus's own PromQL engine (github.com/prometheus/prometheus/promql)
// over a fixed set of series held in memory: a query gets the answer a
// Prometheus server holding those series would give. The series live in a
// small storage.Queryable here rather than Prometheus's TSDB, which would
// add some 360 packages to the tests' build.
package promtest

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
)

// Server is a Prometheus-compatible query API over fixed series.
type Server struct {
	// URL is the server's address, for a check's address field.
	URL string
	// At is when a query without a time parameter is evaluated: the end
	// of the loaded series.
	At time.Time

	engine  *promql.Engine
	storage storage.Queryable

	mu      sync.Mutex
	queries []string
}

// New loads series, one a line in the series notation of Prometheus's
// rule tests (`http_requests_total{code="500"} 0+1x10`: a sample every
// step from time 0; `_` skips one), and serves them until the test ends.
// Queries without a time are evaluated at at, an offset from time 0.
func New(t *testing.T, series []string, step, at time.Duration) *Server {
	t.Helper()
	st, err := load(series, step)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{
		At:      time.Unix(0, 0).Add(at).UTC(),
		engine:  promql.NewEngine(promql.EngineOpts{MaxSamples: 1 << 20, Timeout: time.Minute}),
		storage: st,
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/v1/query", s.query)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// Queries are the queries received, in order.
func (s *Server) Queries() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.queries...)
}

// query answers as Prometheus's /api/v1/query does: parameters query
// and time (Unix seconds or RFC 3339), in the URL or a form body.
func (s *Server) query(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	if err := r.ParseForm(); err != nil {
		apiError(w, http.StatusBadRequest, "bad_data", err)
		return
	}
	q := r.Form.Get("query")
	s.mu.Lock()
	s.queries = append(s.queries, q)
	s.mu.Unlock()
	ts := s.At
	if v := r.Form.Get("time"); v != "" {
		var err error
		if ts, err = parseTime(v); err != nil {
			apiError(w, http.StatusBadRequest, "bad_data", fmt.Errorf("invalid parameter \"time\": %w", err))
			return
		}
	}
	qry, err := s.engine.NewInstantQuery(r.Context(), s.storage, nil, q, ts)
	if err != nil {
		apiError(w, http.StatusBadRequest, "bad_data", fmt.Errorf("invalid parameter \"query\": %w", err))
		return
	}
	defer qry.Close()
	res := qry.Exec(r.Context())
	if res.Err != nil {
		apiError(w, http.StatusUnprocessableEntity, "execution", res.Err)
		return
	}
	data := map[string]any{"resultType": res.Value.Type(), "result": encode(res.Value)}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"status": "success", "data": data})
}

// encode is a result in the API's JSON shape.
func encode(v parser.Value) any {
	switch v := v.(type) {
	case promql.Vector:
		out := make([]any, 0, len(v))
		for _, s := range v {
			out = append(out, map[string]any{"metric": metric(s.Metric), "value": sample(s.T, s.F)})
		}
		return out
	case promql.Matrix:
		out := make([]any, 0, len(v))
		for _, s := range v {
			vals := make([]any, 0, len(s.Floats))
			for _, p := range s.Floats {
				vals = append(vals, sample(p.T, p.F))
			}
			out = append(out, map[string]any{"metric": metric(s.Metric), "values": vals})
		}
		return out
	case promql.Scalar:
		return sample(v.T, v.V)
	case promql.String:
		return []any{float64(v.T) / 1000, v.V}
	}
	return nil
}

func metric(ls labels.Labels) map[string]string { return ls.Map() }

// sample is [seconds, "value"], the value formatted as Prometheus does.
func sample(t int64, f float64) []any {
	var s string
	switch {
	case math.IsInf(f, 1):
		s = "+Inf"
	case math.IsInf(f, -1):
		s = "-Inf"
	case math.IsNaN(f):
		s = "NaN"
	default:
		s = strconv.FormatFloat(f, 'f', -1, 64)
	}
	return []any{float64(t) / 1000, s}
}

func parseTime(v string) (time.Time, error) {
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		sec, frac := math.Modf(f)
		return time.Unix(int64(sec), int64(frac*1e9)).UTC(), nil
	}
	return time.Parse(time.RFC3339Nano, v)
}

func apiError(w http.ResponseWriter, code int, typ string, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"status": "error", "errorType": typ, "error": err.Error()})
}
