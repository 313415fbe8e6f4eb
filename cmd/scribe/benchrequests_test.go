package main

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// apiRequests is the API server's apiserver_request_total by verb,
// resource and subresource (every client's: the benchmark's own creations
// included), read from its /metrics.
type apiRequests map[string]float64

func readAPIRequests(ctx context.Context, b *testing.B, cfg *rest.Config) apiRequests {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		b.Fatalf("read the API server's /metrics: %v", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		b.Fatalf("parse the API server's /metrics: %v", err)
	}
	out := apiRequests{}
	fam := families["apiserver_request_total"]
	if fam == nil {
		return out
	}
	for _, m := range fam.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		key := labels["verb"] + " " + labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			key += "/" + sub
		}
		out[key] += m.GetCounter().GetValue()
	}
	return out
}

// since lists what changed from before, the largest first: "N verb
// resource", at most top entries, and the total.
func (after apiRequests) since(before apiRequests, top int) string {
	type row struct {
		key string
		n   float64
	}
	var rows []row
	var total float64
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			rows = append(rows, row{k, d})
			total += d
		}
	}
	slices.SortFunc(rows, func(a, b row) int {
		if a.n != b.n {
			if a.n > b.n {
				return -1
			}
			return 1
		}
		return strings.Compare(a.key, b.key)
	})
	var parts []string
	for i, r := range rows {
		if i == top {
			break
		}
		parts = append(parts, fmt.Sprintf("%.0f %s", r.n, r.key))
	}
	return fmt.Sprintf("%.0f requests: %s", total, strings.Join(parts, ", "))
}
