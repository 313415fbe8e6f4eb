package controller_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/controller"
)

// doublings is a condition that doubles a string n times with `let`: few
// nodes, 2^n bytes.
func doublings(n int) string {
	var b strings.Builder
	b.WriteString(`let s0 = "xxxxxxxx"; `)
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "let s%d = s%d + s%d; ", i, i-1, i-1)
	}
	fmt.Fprintf(&b, "len(s%d) > 0", n)
	return b.String()
}

// TestConditionBudgetStopsHostileConditions: a template's condition that
// would allocate gigabytes or run for minutes within expr-lang's node
// bound fails the check with ErrConditionBudget, naming the condition,
// instead of exhausting the controller. (The test's -timeout is the
// bound on wall-clock time; the assertion is on the error.)
func TestConditionBudgetStopsHostileConditions(t *testing.T) {
	big := strings.Repeat("1", 1<<20)
	many := make([]any, 10000)
	for i := range many {
		many[i] = float64(i)
	}
	for _, tt := range []struct {
		name, success string
		result        any
	}{
		{name: "130 let string doublings", success: doublings(130)},
		{name: "doublings inside a loop", success: doublings(40) + ` && all(1..100000, {let a = s40 + s40; let b = a + a; len(b) > 0})`},
		{name: "repeat of a billion", success: `repeat("x", 1000000000) != ""`},
		{name: "a range of a billion", success: `len(1..1000000000) > 0`},
		{name: "replace with an empty old string multiplies the text", success: doublings(18) + ` && replace(s18, "", s18) != ""`},
		{name: "join with a large separator", success: doublings(18) + ` && join(split(s18, ""), s18) != ""`},
		{name: "a large string scanned in a loop", success: `all(1..100000, {not (result contains "needle")})`, result: big},
		{name: "a large number parsed in a loop", success: `all(1..100000, {asFloat(result) > 0})`, result: "0." + big},
		{name: "a large string compared in a loop", success: `all(1..100000, {result != "x"})`, result: big},
		{name: "a large key looked up in a loop", success: doublings(18) + ` && all(1..100000, {{"a": 1}[s18] == nil})`},
		{name: "a pattern built at run time", success: doublings(12) + ` && all(1..1000, {result matches s12})`, result: big},
		{name: "nested loops over the answer", success: `all(result, {all(result, {all(result, {# >= 0})})})`, result: many},
		{name: "nested ranges", success: `all(1..1000, {all(1..1000, {all(1..1000, {true})})})`},
		{name: "toJSON of a nested answer in a loop", success: `all(1..100000, {toJSON(result) != ""})`, result: many},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var res scribev1.CheckResult
			err := controller.JudgeConditions(t.Context(), &res, tt.success, "", "q", tt.result, true)
			if !errors.Is(err, controller.ErrConditionBudget) {
				t.Fatalf("err = %v, want the evaluation budget's", err)
			}
			if !strings.Contains(err.Error(), "successCondition") {
				t.Fatalf("err = %v does not name the condition", err)
			}
		})
	}
}

// TestConditionBudgetEndsWithTheRound: a condition still running when the
// analysis round's context is done stops at its next charge.
func TestConditionBudgetEndsWithTheRound(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var res scribev1.CheckResult
	err := controller.JudgeConditions(ctx, &res, "", `all(1..10, {# > 0}) && result > 0`, "q", 1.0, true)
	if !errors.Is(err, controller.ErrConditionBudget) || !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "failureCondition") {
		t.Fatalf("err = %v, want the budget's, naming the failureCondition and the round's end", err)
	}
}

// TestConditionBudgetKeepsHonestConditions: the conditions Argo Rollouts'
// users write, over large answers, stay well within the budget and keep
// their meaning.
func TestConditionBudgetKeepsHonestConditions(t *testing.T) {
	many := make([]any, 100000)
	for i := range many {
		many[i] = 0.5
	}
	doc := map[string]any{"data": map[string]any{"ok": true, "rate": 0.01, "items": many, "name": strings.Repeat("a", 1<<20)}}
	for _, tt := range []struct {
		name, success string
		result        any
		passed        bool
	}{
		{name: "every value of a large vector", success: `all(result, {# < 1})`, result: many, passed: true},
		{name: "a count over a large vector", success: `count(result, {# > 0.9}) == 0 && len(result) == 100000`, result: many, passed: true},
		{name: "a field of a large document", success: `result.data.ok && result.data.rate < 0.05`, result: doc, passed: true},
		{name: "a computed key", success: `let k = "ra" + "te"; result.data[k] < 0.05`, result: doc, passed: true},
		{name: "a large string read once", success: `result.data.name startsWith "aaa" && len(result.data.name) > 100`, result: doc, passed: true},
		{name: "string helpers", success: `lower("OK") == "ok" && trim(" a ") == "a" && "b" in split("a,b", ",")`, result: doc, passed: true},
		{name: "a range and a sum", success: `sum(1..100) == 5050 && 3 in 1..5`, result: doc, passed: true},
		{name: "a filter then map", success: `len(map(filter(result, {# > 0.1}), {# * 2})) == 100000`, result: many, passed: true},
		{name: "optional chaining", success: `result?.data?.missing == nil`, result: doc, passed: true},
		{name: "a condition that does not hold", success: `result.data.rate > 0.05`, result: doc, passed: false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var res scribev1.CheckResult
			if err := controller.JudgeConditions(t.Context(), &res, tt.success, "", "q", tt.result, true); err != nil {
				t.Fatal(err)
			}
			if res.Passed != tt.passed {
				t.Fatalf("passed = %v, want %v (%s)", res.Passed, tt.passed, res.Message)
			}
		})
	}
}
