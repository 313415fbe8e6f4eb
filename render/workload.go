package render

import (
	"context"
	"fmt"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/render/contract"
)

// renderWorkload renders a validated Workload with the split of in.
// trafficPath is where the split came from, for errors: status.traffic in
// a file, traffic in a WorkloadInput.
func (e *Engine) renderWorkload(ctx context.Context, d *decoded, in WorkloadInput, trafficPath string) (*Bundle, error) {
	w, ok := d.typed.(*scribev1.Workload)
	if !ok {
		return nil, fmt.Errorf("render %s: not a Workload", d.name)
	}
	traffic, stable, errs := split(w, in.Traffic, in.Stable, trafficPath)
	errs = append(errs, checkPublish(in.Publish)...)
	if len(errs) > 0 {
		return nil, &InputError{Object: d.name, Errors: errs}
	}
	return e.renderBundle(ctx, d, contract.Workload{
		Metadata: metadataOf(w),
		Spec:     w.Spec,
		Traffic:  traffic,
		Stable:   stable,
		Publish:  in.Publish,
	})
}

// split checks the traffic split against spec.versions and picks the
// stable version. Without a split the newest version (the last entry of
// spec.versions) receives all traffic; without a known stable version the
// heaviest one is stable.
func split(w *scribev1.Workload, traffic []scribev1.VersionWeight, stable, at string) ([]scribev1.VersionWeight, string, []FieldError) {
	known := make(map[string]bool, len(w.Spec.Versions))
	for _, v := range w.Spec.Versions {
		known[v.Name] = true
	}
	var errs []FieldError
	best, bestWeight := "", int32(-1)
	if len(traffic) > 0 {
		sum := int64(0)
		for i, t := range traffic {
			if !known[t.Version] {
				errs = append(errs, FieldError{Path: fmt.Sprintf("%s[%d].version", at, i), Message: fmt.Sprintf("version %q is not in spec.versions", t.Version)})
			}
			sum += int64(t.Weight)
			if t.Weight > bestWeight {
				best, bestWeight = t.Version, t.Weight
			}
		}
		if sum != 100 {
			errs = append(errs, FieldError{Path: at, Message: fmt.Sprintf("weights add up to %d, not 100", sum)})
		}
	} else if n := len(w.Spec.Versions); n > 0 {
		best = w.Spec.Versions[n-1].Name
		traffic = []scribev1.VersionWeight{{Version: best, Weight: 100}}
	}
	if stable == "" || !known[stable] {
		stable = best
	}
	return traffic, stable, errs
}
