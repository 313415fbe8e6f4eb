package controller_test

import (
	"testing"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/controller"
)

// TestJudgeValueNamesTheValueAndTheCondition: a check result carries the
// measured value and the condition it had to meet; no value is
// inconclusive, never a pass or a failure.
func TestJudgeValueNamesTheValueAndTheCondition(t *testing.T) {
	for _, tt := range []struct {
		name, min, max string
		value          float64
		found          bool
		// want
		passed, inconclusive bool
		val, cond, message   string
	}{
		{name: "within max", max: "0.05", value: 0.01, found: true, passed: true, val: "0.01", cond: "<= 0.05", message: "q = 0.01"},
		{name: "above max", max: "0.05", value: 0.2, found: true, val: "0.2", cond: "<= 0.05", message: "q = 0.2, above 0.05"},
		{name: "below min", min: "0.9", value: 0.5, found: true, val: "0.5", cond: ">= 0.9", message: "q = 0.5, below 0.9"},
		{name: "within a range", min: "1", max: "2", value: 1.5, found: true, passed: true, val: "1.5", cond: "within [1, 2]"},
		{name: "no bound: any value passes", value: -3, found: true, passed: true, val: "-3", cond: "any value"},
		{name: "no value: inconclusive", max: "0.05", inconclusive: true, cond: "<= 0.05", message: "q returned no sample"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var res scribev1.CheckResult
			if err := controller.JudgeValue(&res, scribev1.Check{Min: tt.min, Max: tt.max}, "q", tt.value, tt.found); err != nil {
				t.Fatal(err)
			}
			if res.Passed != tt.passed || res.Inconclusive != tt.inconclusive || res.Value != tt.val || res.Condition != tt.cond {
				t.Fatalf("result %+v, want passed=%v inconclusive=%v value=%q condition=%q", res, tt.passed, tt.inconclusive, tt.val, tt.cond)
			}
			if tt.message != "" && res.Message != tt.message {
				t.Fatalf("message %q, want %q", res.Message, tt.message)
			}
		})
	}
	if err := controller.JudgeValue(&scribev1.CheckResult{}, scribev1.Check{Max: "x"}, "q", 1, true); err == nil {
		t.Fatal("a malformed max was taken")
	}
}
