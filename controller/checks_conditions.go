package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/expr-lang/expr"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/textcut"
)

// maxConditionNodes bounds a condition's size: it is written by whoever
// writes the template. What it does when it runs is bounded by its
// evaluation budget (checks_budget.go).
const maxConditionNodes = 1000

// JudgeConditions decides a check on Argo Rollouts' successCondition and
// failureCondition over result (the provider's answer), as Argo Rollouts
// does: a failureCondition that holds fails; otherwise a successCondition
// that holds passes and one that does not fails, unless a failureCondition
// is also set, when neither holding is inconclusive; a failureCondition
// alone that does not hold passes. An answer without a value is
// inconclusive. An error is a condition that does not compile or run, or
// that exceeds its evaluation budget (ErrConditionBudget) or outlives ctx.
func JudgeConditions(ctx context.Context, res *scribev1.CheckResult, success, failure, asked string, result any, found bool) error {
	return judgeConditions(ctx, res, success, failure, measurement{asked: asked, raw: result, found: found})
}

func judgeConditions(ctx context.Context, res *scribev1.CheckResult, success, failure string, m measurement) error {
	var conds []string
	if success != "" {
		conds = append(conds, "successCondition: "+success)
	}
	if failure != "" {
		conds = append(conds, "failureCondition: "+failure)
	}
	res.Condition = textcut.Ellipsis(strings.Join(conds, "; "), 512)
	if !m.found {
		res.Passed, res.Inconclusive = false, true
		res.Message = fmt.Sprintf("%s returned no sample", m.asked)
		return nil
	}
	res.Value = valueText(m.raw)
	if failure != "" {
		failed, err := holds(ctx, failure, m.raw)
		if err != nil {
			return fmt.Errorf("failureCondition %q: %w", textcut.Ellipsis(failure, maxQuotedCondition), err)
		}
		if failed {
			res.Passed, res.Message = false, fmt.Sprintf("%s = %s: failureCondition %s holds", m.asked, res.Value, failure)
			return nil
		}
	}
	if success == "" {
		res.Passed, res.Message = true, fmt.Sprintf("%s = %s", m.asked, res.Value)
		return nil
	}
	ok, err := holds(ctx, success, m.raw)
	switch {
	case err != nil:
		return fmt.Errorf("successCondition %q: %w", textcut.Ellipsis(success, maxQuotedCondition), err)
	case ok:
		res.Passed, res.Message = true, fmt.Sprintf("%s = %s", m.asked, res.Value)
	case failure != "":
		res.Passed, res.Inconclusive = false, true
		res.Message = fmt.Sprintf("%s = %s: neither condition holds", m.asked, res.Value)
	default:
		res.Passed, res.Message = false, fmt.Sprintf("%s = %s: successCondition %s does not hold", m.asked, res.Value, success)
	}
	return nil
}

// maxQuotedCondition is the most bytes of a condition an error quotes, so
// that the reason after it survives the message's bound.
const maxQuotedCondition = 120

// holds evaluates cond with `result` bound, with the functions Argo
// Rollouts offers its conditions, within one evaluation budget that also
// ends with ctx.
func holds(ctx context.Context, cond string, result any) (bool, error) {
	budget := newExprBudget(ctx, maxConditionWork)
	// asInt and asFloat parse a string: they charge it, as the patched
	// operators do.
	parse := func(name string, v any) (float64, error) {
		if err := budget.charge(name, v); err != nil {
			return 0, err
		}
		f, ok, err := number(v, "result")
		if err != nil || !ok {
			return 0, fmt.Errorf("%s: %s is not a number", name, valueText(v))
		}
		return f, nil
	}
	env := map[string]any{
		"result": result,
		"isNaN":  math.IsNaN,
		"isInf":  func(f float64) bool { return math.IsInf(f, 0) },
		"isNil":  func(v any) bool { return v == nil },
		"asInt": func(v any) (int64, error) {
			f, err := parse("asInt", v)
			return int64(f), err
		},
		"asFloat": func(v any) (float64, error) {
			return parse("asFloat", v)
		},
		"default": func(v, d any) any {
			if v == nil {
				return d
			}
			return v
		},
	}
	prog, err := expr.Compile(cond, append(conditionOptions(budget), expr.Env(env), expr.AsBool())...)
	if err != nil {
		return false, fmt.Errorf("%s", remoteText(err.Error()))
	}
	out, err := runCondition(prog, env, budget)
	switch {
	case errors.Is(err, ErrConditionBudget):
		return false, err
	case err != nil:
		return false, fmt.Errorf("%s", remoteText(err.Error()))
	}
	b, _ := out.(bool)
	return b, nil
}

// valueText is an answer as status shows it: compact JSON, at most 200 bytes.
func valueText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return textcut.Ellipsis(fmt.Sprint(v), maxRemoteText)
	}
	return textcut.Ellipsis(string(b), maxRemoteText)
}
