package controller

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/expr-lang/expr"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/textcut"
)

// maxConditionNodes bounds a condition's size: it is written by whoever
// writes the template.
const maxConditionNodes = 1000

// JudgeConditions decides a check on Argo Rollouts' successCondition and
// failureCondition over result (the provider's answer), as Argo Rollouts
// does: a failureCondition that holds fails; otherwise a successCondition
// that holds passes and one that does not fails, unless a failureCondition
// is also set, when neither holding is inconclusive; a failureCondition
// alone that does not hold passes. An answer without a value is
// inconclusive. An error is a condition that does not compile or run.
func JudgeConditions(res *scribev1.CheckResult, success, failure, asked string, result any, found bool) error {
	return judgeConditions(res, success, failure, measurement{asked: asked, raw: result, found: found})
}

func judgeConditions(res *scribev1.CheckResult, success, failure string, m measurement) error {
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
		failed, err := holds(failure, m.raw)
		if err != nil {
			return fmt.Errorf("failureCondition %q: %w", failure, err)
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
	ok, err := holds(success, m.raw)
	switch {
	case err != nil:
		return fmt.Errorf("successCondition %q: %w", success, err)
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

// holds evaluates cond with `result` bound, with the functions Argo
// Rollouts offers its conditions.
func holds(cond string, result any) (bool, error) {
	env := map[string]any{
		"result": result,
		"isNaN":  math.IsNaN,
		"isInf":  func(f float64) bool { return math.IsInf(f, 0) },
		"isNil":  func(v any) bool { return v == nil },
		"asInt": func(v any) (int64, error) {
			f, ok, err := number(v, "result")
			if err != nil || !ok {
				return 0, fmt.Errorf("asInt: %v is not a number", v)
			}
			return int64(f), nil
		},
		"asFloat": func(v any) (float64, error) {
			f, ok, err := number(v, "result")
			if err != nil || !ok {
				return 0, fmt.Errorf("asFloat: %v is not a number", v)
			}
			return f, nil
		},
		"default": func(v, d any) any {
			if v == nil {
				return d
			}
			return v
		},
	}
	prog, err := expr.Compile(cond, expr.Env(env), expr.AsBool(), expr.MaxNodes(maxConditionNodes))
	if err != nil {
		return false, fmt.Errorf("%s", remoteText(err.Error()))
	}
	out, err := expr.Run(prog, env)
	if err != nil {
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
