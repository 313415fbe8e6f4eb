package render

import (
	"fmt"
)

// workloadInput adds the traffic split and stable version to the CUE input.
// The controller records both in status; without them the newest version
// (the last entry of spec.versions) receives all traffic.
func workloadInput(obj map[string]any, in map[string]any) []FieldError {
	spec, _ := obj["spec"].(map[string]any)
	status, _ := obj["status"].(map[string]any)
	versions, _ := spec["versions"].([]any)
	known := map[string]bool{}
	var names []string
	for _, v := range versions {
		n, _ := v.(map[string]any)["name"].(string)
		known[n] = true
		names = append(names, n)
	}
	var errs []FieldError
	var traffic []map[string]any
	sum := int64(0)
	stable, _ := status["stableVersion"].(string)
	best, bestWeight := "", int64(-1)
	if st, ok := status["traffic"].([]any); ok && len(st) > 0 {
		for i, t := range st {
			tm, _ := t.(map[string]any)
			ver, _ := tm["version"].(string)
			w := toInt(tm["weight"])
			if !known[ver] {
				errs = append(errs, FieldError{Path: fmt.Sprintf("status.traffic[%d].version", i), Message: fmt.Sprintf("version %q is not in spec.versions", ver)})
			}
			sum += w
			if w > bestWeight {
				best, bestWeight = ver, w
			}
			traffic = append(traffic, map[string]any{"version": ver, "weight": w})
		}
		if sum != 100 {
			errs = append(errs, FieldError{Path: "status.traffic", Message: fmt.Sprintf("weights add up to %d, not 100", sum)})
		}
	} else if len(names) > 0 {
		best = names[len(names)-1]
		traffic = []map[string]any{{"version": best, "weight": 100}}
	}
	if stable == "" || !known[stable] {
		stable = best
	}
	in["traffic"] = traffic
	in["stable"] = stable
	return errs
}

func toInt(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case int:
		return int64(n)
	case float64:
		return int64(n)
	case int32:
		return int64(n)
	}
	return 0
}
