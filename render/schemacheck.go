package render

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"cuelang.org/go/cue"
)

// The schema check of rendered objects, compiled. Unifying every rendered
// object with the CUE definition of its kind was most of a render's time
// and allocations; instead each registry schema is translated into a tree
// of schemaNodes that checks the decoded JSON of an object directly. The
// translation (schemacompile_test.go) runs at generate time: its result for
// every registry kind is embedded as schemachecks.json.gz
// (schemachecks_file.go), so neither the translation nor the CUE schemas
// are paid for at run time. TestEmbeddedSchemaChecks fails when the
// embedded checks differ from those the current registry compiles to, and
// TestCompiledSchemaRejectsWhatCUERejects proves the embedded check
// rejects every mutation of every golden object that the CUE check
// rejects.

// Data kinds, as a bit set.
const (
	kindNull uint8 = 1 << iota
	kindBool
	kindInt
	kindFloat
	kindString
	kindList
	kindStruct

	kindNumber = kindInt | kindFloat
	kindAll    = kindNull | kindBool | kindNumber | kindString | kindList | kindStruct
)

// schemaNode checks one value. Every part that is set must hold.
type schemaNode struct {
	kinds  uint8 // allowed kinds of data
	checks []scalarCheck
	anyOf  []*schemaNode // at least one must hold (a disjunction)
	allOf  []*schemaNode // every one must hold (conjuncts not merged into this node)

	// Structs.
	fields    map[string]*fieldNode
	required  []string // required fields, sorted
	regular   []string // regular struct and list fields: when absent, checked as {} or []
	closed    bool     // fields neither declared nor matched by pattern are errors
	pattern   *schemaNode
	minFields int
	maxFields int // -1: no bound

	// Lists.
	prefix   []*schemaNode
	elem     *schemaNode // nil: no elements beyond prefix
	isList   bool        // prefix and elem are the list's elements
	minItems int
	maxItems int // -1: no bound

	// matchN is CUE's matchN validator.
	matchN *matchN

	// never is set when no value is allowed (the schema is an error here).
	never string
	// untranslated is set when the compiler could not translate this
	// subtree (why); such a schema is never embedded (schemachecks_file.go).
	untranslated string
}

type fieldNode struct {
	node *schemaNode
}

func newNode() *schemaNode { return &schemaNode{kinds: kindAll, maxFields: -1, maxItems: -1} }

// scalarCheck is one constraint on a scalar; it returns a message when v
// breaks it.
type scalarCheck interface {
	check(v any) string
}

// compiledSchema is the compiled check of one registry kind.
type compiledSchema struct {
	root         *schemaNode
	untranslated []string // "path: why" of every untranslated subtree
}

// literal is a concrete scalar of a schema.
type literal struct {
	kind uint8
	s    string  // string value, or the number as written
	f    float64 // number
	i    int64   // int
	isI  bool    // i holds the value exactly
	b    bool
}

func (l literal) String() string {
	if l.kind == kindString {
		return strconv.Quote(l.s)
	}
	return l.s
}

// check: data equals the literal (same kind, as in CUE: 1 and 1.0 conflict).
func (l literal) check(v any) string {
	if l.equal(v) {
		return ""
	}
	return fmt.Sprintf("conflicting values %s and %s", l, dataString(v))
}

func (l literal) equal(v any) bool {
	switch l.kind {
	case kindNull:
		return v == nil
	case kindBool:
		b, ok := v.(bool)
		return ok && b == l.b
	case kindString:
		s, ok := v.(string)
		return ok && s == l.s
	case kindInt, kindFloat:
		n, ok := numberOf(v)
		if !ok || n.kind != l.kind {
			return false
		}
		if l.isI && n.isI {
			return n.i == l.i
		}
		return n.f == l.f
	}
	return false
}

// numberOf reads a JSON number of the data.
func numberOf(v any) (literal, bool) {
	switch t := v.(type) {
	case json.Number:
		s := string(t)
		if strings.ContainsAny(s, ".eE") {
			f, err := strconv.ParseFloat(s, 64)
			return literal{kind: kindFloat, f: f, s: s}, err == nil
		}
		i, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			f, ferr := strconv.ParseFloat(s, 64)
			return literal{kind: kindInt, f: f, s: s}, ferr == nil
		}
		return literal{kind: kindInt, i: i, isI: true, f: float64(i), s: s}, true
	case int64:
		return literal{kind: kindInt, i: t, isI: true, f: float64(t), s: strconv.FormatInt(t, 10)}, true
	case int:
		return literal{kind: kindInt, i: int64(t), isI: true, f: float64(t), s: strconv.Itoa(t)}, true
	case float64:
		return literal{kind: kindFloat, f: t, s: strconv.FormatFloat(t, 'g', -1, 64)}, true
	}
	return literal{}, false
}

func kindOfData(v any) uint8 {
	switch t := v.(type) {
	case nil:
		return kindNull
	case bool:
		return kindBool
	case string:
		return kindString
	case []any:
		return kindList
	case map[string]any:
		return kindStruct
	default:
		if n, ok := numberOf(t); ok {
			return n.kind
		}
	}
	return 0
}

func kindNames(k uint8) string {
	if k == kindAll {
		return "_"
	}
	var names []string
	for _, kn := range []struct {
		k    uint8
		name string
	}{{kindNull, "null"}, {kindBool, "bool"}, {kindNumber, "number"}, {kindInt, "int"}, {kindFloat, "float"}, {kindString, "string"}, {kindList, "list"}, {kindStruct, "struct"}} {
		if k&kn.k == kn.k {
			names = append(names, kn.name)
			k &^= kn.k
		}
	}
	return strings.Join(names, "|")
}

func dataString(v any) string {
	switch t := v.(type) {
	case string:
		return strconv.Quote(t)
	case nil:
		return "null"
	case []any:
		return "list"
	case map[string]any:
		return "struct"
	}
	return fmt.Sprint(v)
}

type boundCheck struct {
	op  cue.Op
	lit literal
	src string
}

func (b boundCheck) check(v any) string {
	var c int // sign of v - bound
	switch b.lit.kind {
	case kindString:
		s, ok := v.(string)
		if !ok {
			if b.op == cue.NotEqualOp {
				return ""
			}
			return fmt.Sprintf("invalid value %s (mismatched types %s and string)", dataString(v), kindNames(kindOfData(v)))
		}
		c = strings.Compare(s, b.lit.s)
	case kindInt, kindFloat:
		n, ok := numberOf(v)
		if !ok {
			if b.op == cue.NotEqualOp {
				return ""
			}
			return fmt.Sprintf("invalid value %s (mismatched types %s and number)", dataString(v), kindNames(kindOfData(v)))
		}
		switch {
		case n.isI && b.lit.isI:
			c = cmpInt(n.i, b.lit.i)
		default:
			c = cmpFloat(n.f, b.lit.f)
		}
	default:
		if b.op == cue.NotEqualOp {
			if b.lit.equal(v) {
				return fmt.Sprintf("invalid value %s (out of bound %s)", dataString(v), b.src)
			}
			return ""
		}
		return "unsupported bound " + b.src
	}
	ok := false
	switch b.op {
	case cue.LessThanOp:
		ok = c < 0
	case cue.LessThanEqualOp:
		ok = c <= 0
	case cue.GreaterThanOp:
		ok = c > 0
	case cue.GreaterThanEqualOp:
		ok = c >= 0
	case cue.NotEqualOp:
		ok = c != 0 || (b.lit.kind&kindNumber != 0 && kindOfData(v) != b.lit.kind)
	}
	if ok {
		return ""
	}
	return fmt.Sprintf("invalid value %s (out of bound %s)", dataString(v), b.src)
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	case math.IsNaN(a) || math.IsNaN(b):
		return 2
	}
	return 0
}

type regexCheck struct {
	re  *regexp.Regexp
	neg bool
	src string
}

func (r regexCheck) check(v any) string {
	s, ok := v.(string)
	if !ok {
		return fmt.Sprintf("invalid value %s (mismatched types %s and string)", dataString(v), kindNames(kindOfData(v)))
	}
	if r.re.MatchString(s) != r.neg {
		return ""
	}
	return fmt.Sprintf("invalid value %s (out of bound %s)", strconv.Quote(s), r.src)
}

type runesCheck struct {
	max bool
	n   int
}

func (r runesCheck) check(v any) string {
	s, ok := v.(string)
	if !ok {
		return fmt.Sprintf("invalid value %s (mismatched types %s and string)", dataString(v), kindNames(kindOfData(v)))
	}
	c := utf8.RuneCountInString(s)
	if r.max && c > r.n {
		return fmt.Sprintf("invalid value %s (does not satisfy strings.MaxRunes(%d))", strconv.Quote(s), r.n)
	}
	if !r.max && c < r.n {
		return fmt.Sprintf("invalid value %s (does not satisfy strings.MinRunes(%d))", strconv.Quote(s), r.n)
	}
	return ""
}

type timeCheck struct{}

func (timeCheck) check(v any) string {
	s, ok := v.(string)
	if !ok {
		return fmt.Sprintf("invalid value %s (mismatched types %s and string)", dataString(v), kindNames(kindOfData(v)))
	}
	if _, err := time.ParseInLocation(time.RFC3339Nano, s, time.UTC); err != nil {
		return fmt.Sprintf("invalid value %s (does not satisfy time.Time): invalid time %q", strconv.Quote(s), s)
	}
	return ""
}

// validation collects the errors of one check of an object.
type validation struct {
	path []pathElem
	errs []FieldError
}

type pathElem struct {
	name string
	idx  int // >= 0: a list index
}

func (vd *validation) pathString() string {
	var b strings.Builder
	for _, p := range vd.path {
		if p.idx >= 0 {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(p.idx))
			b.WriteByte(']')
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(p.name)
	}
	return b.String()
}

func (vd *validation) fail(msg string) {
	vd.errs = append(vd.errs, FieldError{Path: vd.pathString(), Message: msg})
}

// check validates data (decoded JSON, numbers as json.Number) against the
// compiled schema; errors are sorted by path.
func (s *compiledSchema) check(data any) []FieldError {
	var vd validation
	s.root.validate(&vd, data)
	sort.SliceStable(vd.errs, func(i, j int) bool { return vd.errs[i].Path < vd.errs[j].Path })
	return vd.errs
}

func (n *schemaNode) validate(vd *validation, v any) {
	if n.never != "" {
		vd.fail(n.never)
		return
	}
	if n.untranslated != "" {
		vd.fail("schema not translated: " + n.untranslated)
		return
	}
	k := kindOfData(v)
	if n.kinds&k == 0 {
		vd.fail(fmt.Sprintf("conflicting values %s and %s (mismatched types %s and %s)", dataString(v), kindNames(n.kinds), kindNames(k), kindNames(n.kinds)))
		return
	}
	for _, c := range n.checks {
		if msg := c.check(v); msg != "" {
			vd.fail(msg)
		}
	}
	switch t := v.(type) {
	case map[string]any:
		n.validateStruct(vd, t)
	case []any:
		n.validateList(vd, t)
	}
	for _, m := range n.allOf {
		m.validate(vd, v)
	}
	if n.matchN != nil {
		n.matchN.validate(vd, v)
	}
	if len(n.anyOf) > 0 {
		n.validateAnyOf(vd, v, k)
	}
}

func (n *schemaNode) validateAnyOf(vd *validation, v any, k uint8) {
	var sub validation
	sub.path = vd.path
	var kindMatches []int
	var altErrs [][]FieldError
	for i, alt := range n.anyOf {
		sub.errs = nil
		alt.validate(&sub, v)
		if len(sub.errs) == 0 {
			return
		}
		altErrs = append(altErrs, sub.errs)
		if alt.kinds&k != 0 {
			kindMatches = append(kindMatches, i)
		}
	}
	if len(kindMatches) == 1 {
		vd.errs = append(vd.errs, altErrs[kindMatches[0]]...)
		return
	}
	var alts []string
	for _, alt := range n.anyOf {
		if len(alt.checks) == 1 {
			if l, ok := alt.checks[0].(literal); ok {
				alts = append(alts, l.String())
				continue
			}
		}
		alts = append(alts, kindNames(alt.kinds))
	}
	vd.fail(fmt.Sprintf("%d errors in empty disjunction: %s matches none of %s", len(n.anyOf), dataString(v), strings.Join(alts, " | ")))
}

func (n *schemaNode) validateStruct(vd *validation, m map[string]any) {
	if n.fields == nil {
		if n.minFields > 0 && len(m) < n.minFields {
			vd.fail(fmt.Sprintf("invalid value %s (does not satisfy struct.MinFields(%d))", dataString(m), n.minFields))
		}
		if n.maxFields >= 0 && len(m) > n.maxFields {
			vd.fail(fmt.Sprintf("invalid value %s (does not satisfy struct.MaxFields(%d))", dataString(m), n.maxFields))
		}
		return
	}
	for key, val := range m {
		f := n.fields[key]
		var schema *schemaNode
		switch {
		case f != nil:
			schema = f.node
		case n.closed:
			vd.path = append(vd.path, pathElem{name: key, idx: -1})
			vd.fail("field not allowed")
			vd.path = vd.path[:len(vd.path)-1]
			continue
		case n.pattern != nil:
			schema = n.pattern
		default:
			continue
		}
		vd.path = append(vd.path, pathElem{name: key, idx: -1})
		schema.validate(vd, val)
		vd.path = vd.path[:len(vd.path)-1]
	}
	for _, r := range n.required {
		if _, ok := m[r]; !ok {
			vd.path = append(vd.path, pathElem{name: r, idx: -1})
			vd.fail("field is required but not present")
			vd.path = vd.path[:len(vd.path)-1]
		}
	}
	for _, r := range n.regular {
		if _, ok := m[r]; !ok {
			f := n.fields[r].node
			var empty any = map[string]any{}
			if f.kinds&kindStruct == 0 {
				empty = []any{}
			}
			vd.path = append(vd.path, pathElem{name: r, idx: -1})
			f.validate(vd, empty)
			vd.path = vd.path[:len(vd.path)-1]
		}
	}
	if n.minFields > 0 && len(m) < n.minFields {
		vd.fail(fmt.Sprintf("invalid value %s (does not satisfy struct.MinFields(%d))", dataString(m), n.minFields))
	}
	if n.maxFields >= 0 && len(m) > n.maxFields {
		vd.fail(fmt.Sprintf("invalid value %s (does not satisfy struct.MaxFields(%d))", dataString(m), n.maxFields))
	}
}

func (n *schemaNode) validateList(vd *validation, l []any) {
	if n.minItems > 0 && len(l) < n.minItems {
		vd.fail(fmt.Sprintf("invalid value %s (does not satisfy list.MinItems(%d)): len(list) < MinItems(%d) (%d < %d)", dataString(l), n.minItems, n.minItems, len(l), n.minItems))
	}
	if n.maxItems >= 0 && len(l) > n.maxItems {
		vd.fail(fmt.Sprintf("invalid value %s (does not satisfy list.MaxItems(%d)): len(list) > MaxItems(%d) (%d > %d)", dataString(l), n.maxItems, n.maxItems, len(l), n.maxItems))
	}
	if !n.isList {
		return // only counts (list.MaxItems) or no list schema (_)
	}
	if len(l) < len(n.prefix) {
		vd.fail(fmt.Sprintf("incompatible list lengths (%d and %d)", len(l), len(n.prefix)))
	}
	for i, e := range l {
		var schema *schemaNode
		switch {
		case i < len(n.prefix):
			schema = n.prefix[i]
		case n.elem != nil:
			schema = n.elem
		default:
			vd.fail(fmt.Sprintf("incompatible list lengths (%d and %d)", len(n.prefix), len(l)))
			return
		}
		vd.path = append(vd.path, pathElem{idx: i})
		schema.validate(vd, e)
		vd.path = vd.path[:len(vd.path)-1]
	}
}

type absURLCheck struct{}

func (absURLCheck) check(v any) string {
	s, ok := v.(string)
	if !ok {
		return fmt.Sprintf("invalid value %s (mismatched types %s and string)", dataString(v), kindNames(kindOfData(v)))
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Sprintf("invalid value %s (does not satisfy net.AbsURL): %v", strconv.Quote(s), err)
	}
	if !u.IsAbs() {
		return fmt.Sprintf("invalid value %s (does not satisfy net.AbsURL): URL is not absolute", strconv.Quote(s))
	}
	return ""
}

type matchN struct {
	count   *schemaNode
	schemas []*schemaNode
	src     string
}

func (m *matchN) validate(vd *validation, v any) {
	matched := 0
	var sub validation
	sub.path = vd.path
	for _, s := range m.schemas {
		sub.errs = nil
		s.validate(&sub, v)
		if len(sub.errs) == 0 {
			matched++
		}
	}
	sub.errs = nil
	m.count.validate(&sub, json.Number(strconv.Itoa(matched)))
	if len(sub.errs) > 0 {
		vd.fail(fmt.Sprintf("invalid value %s (does not satisfy %s): %d matched", dataString(v), m.src, matched))
	}
}

// base64Check is a Go []byte field (CUE bytes) as the apiserver decodes
// it from JSON: a string in standard, padded base64 (encoding/json skips
// line breaks in it, and so does this check).
type base64Check struct{}

func (base64Check) check(v any) string {
	s, ok := v.(string)
	if !ok {
		return fmt.Sprintf("invalid value %s (mismatched types %s and string)", dataString(v), kindNames(kindOfData(v)))
	}
	if _, err := base64.StdEncoding.DecodeString(s); err != nil {
		return fmt.Sprintf("invalid value %s (not base64 bytes: %v)", strconv.Quote(s), err)
	}
	return ""
}
