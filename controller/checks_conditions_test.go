package controller_test

import (
	"strings"
	"testing"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/controller"
)

// TestJudgeConditionsFollowsArgoRollouts: an analysis template's
// successCondition and failureCondition decide a result as Argo Rollouts
// decides a measurement, over the provider's answer as `result`.
func TestJudgeConditionsFollowsArgoRollouts(t *testing.T) {
	for _, tt := range []struct {
		name             string
		success, failure string
		result           any
		found            bool
		// want
		passed, inconclusive bool
		value, message, err  string
	}{
		{name: "success holds", success: "result[0] >= 0.95", result: []float64{0.99}, found: true, passed: true, value: "[0.99]"},
		{name: "success does not hold and no failure condition: failed", success: "result[0] >= 0.95", result: []float64{0.5}, found: true,
			value: "[0.5]", message: "successCondition result[0] >= 0.95 does not hold"},
		{name: "failure holds: failed, whatever success says", success: "result > 0", failure: "result > 0.1", result: 0.5, found: true,
			value: "0.5", message: "failureCondition result > 0.1 holds"},
		{name: "failure alone that does not hold: passed", failure: "result > 0.1", result: 0.01, found: true, passed: true, value: "0.01"},
		{name: "both set, neither holds: inconclusive", success: "result < 0.01", failure: "result > 0.1", result: 0.05, found: true,
			inconclusive: true, value: "0.05", message: "neither condition holds"},
		{name: "a New Relic row's field", success: "result.percentage < 5", result: map[string]any{"percentage": 1.5}, found: true, passed: true, value: `{"percentage":1.5}`},
		{name: "Argo's helpers: default and isNil", success: "default(result, 0) < 1 && !isNil(result)", result: 0.5, found: true, passed: true},
		{name: "asFloat of a numeric string", success: `asFloat(result) < 1`, result: "0.5", found: true, passed: true},
		{name: "no value: inconclusive", success: "result[0] >= 0.95", found: false, inconclusive: true, message: "returned no sample"},
		{name: "a condition that does not compile is an error naming it", success: "result >=", result: 1.0, found: true, value: "1", err: `successCondition "result >="`},
		{name: "a condition that fails at run time is an error", success: "result[3] > 0", result: []float64{1}, found: true, value: "[1]", err: "successCondition"},
		{name: "a condition that is not a boolean is an error", success: "result + 1", result: 1.0, found: true, value: "1", err: "successCondition"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var res scribev1.CheckResult
			err := controller.JudgeConditions(t.Context(), &res, tt.success, tt.failure, "q", tt.result, tt.found)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Passed != tt.passed || res.Inconclusive != tt.inconclusive || (tt.value != "" && res.Value != tt.value) {
				t.Fatalf("result %+v, want passed=%v inconclusive=%v value=%q", res, tt.passed, tt.inconclusive, tt.value)
			}
			if !strings.Contains(res.Message, tt.message) {
				t.Fatalf("message %q lacks %q", res.Message, tt.message)
			}
			if !strings.Contains(res.Condition, tt.success) || !strings.Contains(res.Condition, tt.failure) {
				t.Fatalf("condition %q does not name the conditions", res.Condition)
			}
		})
	}
}
