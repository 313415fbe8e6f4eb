package controller

import (
	"fmt"
	"strconv"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// measurement is what a provider answered for one check: what was asked
// (a query, a URL and JSONPath), whether the answer held a value, the
// answer as a template's conditions see it (`result`), and the number
// min and max judge.
type measurement struct {
	asked string
	found bool
	raw   any
	// number is the value as a number (found false: the answer holds
	// none); nil when raw is the number.
	number func() (float64, bool, error)
}

// measured is a measurement whose answer is the number v.
func measured(asked string, v float64, found bool) measurement {
	return measurement{asked: asked, found: found, raw: v}
}

// numberOf is m's value as a number.
func (m measurement) numberOf() (float64, bool, error) {
	if m.number != nil {
		return m.number()
	}
	v, ok := m.raw.(float64)
	return v, ok, nil
}

// JudgeValue decides a check on what its provider answered: no value is
// inconclusive (a version that served no request yet has no sample); a
// value passes when it lies within [min, max]. It fills the result's
// value, condition and message; an error is a malformed min or max.
func JudgeValue(res *scribev1.CheckResult, ch scribev1.Check, asked string, value float64, found bool) error {
	return judge(res, ch, measured(asked, value, found))
}

func judge(res *scribev1.CheckResult, ch scribev1.Check, m measurement) error {
	lo, hi, err := bounds(ch)
	if err != nil {
		return err
	}
	res.Condition = condition(ch)
	v, found := 0.0, false
	if m.found {
		if v, found, err = m.numberOf(); err != nil {
			return err
		}
	}
	if !found {
		res.Passed, res.Inconclusive = false, true
		res.Message = fmt.Sprintf("%s returned no sample", m.asked)
		return nil
	}
	res.Value = strconv.FormatFloat(v, 'g', -1, 64)
	switch {
	case lo != nil && v < *lo:
		res.Passed, res.Message = false, fmt.Sprintf("%s = %s, below %s", m.asked, res.Value, ch.Min)
	case hi != nil && v > *hi:
		res.Passed, res.Message = false, fmt.Sprintf("%s = %s, above %s", m.asked, res.Value, ch.Max)
	default:
		res.Passed, res.Message = true, fmt.Sprintf("%s = %s", m.asked, res.Value)
	}
	return nil
}

// bounds are the check's min and max, nil when not set.
func bounds(ch scribev1.Check) (lo, hi *float64, err error) {
	if ch.Min != "" {
		v, err := strconv.ParseFloat(ch.Min, 64)
		if err != nil {
			return nil, nil, fmt.Errorf("min %q: %w", ch.Min, err)
		}
		lo = &v
	}
	if ch.Max != "" {
		v, err := strconv.ParseFloat(ch.Max, 64)
		if err != nil {
			return nil, nil, fmt.Errorf("max %q: %w", ch.Max, err)
		}
		hi = &v
	}
	return lo, hi, nil
}

// condition is the accepted range as text: ">= 0.9", "<= 0.05", "within [1, 2]".
func condition(ch scribev1.Check) string {
	switch {
	case ch.Min != "" && ch.Max != "":
		return fmt.Sprintf("within [%s, %s]", ch.Min, ch.Max)
	case ch.Min != "":
		return ">= " + ch.Min
	case ch.Max != "":
		return "<= " + ch.Max
	}
	return "any value"
}
