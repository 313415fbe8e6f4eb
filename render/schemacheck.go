package render

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"cuelang.org/go/cue"
	cueerrors "cuelang.org/go/cue/errors"
)

// The schema check of rendered objects, compiled. Unifying every rendered
// object with the CUE definition of its kind was most of a render's time
// and allocations; instead each registry schema is translated once into a
// tree of schemaNodes that checks the decoded JSON of an object directly.
// The translation covers what the generated schemas use: closed structs
// (closedness as CUE itself decides it, see probeClosedness), required and
// regular fields, pattern constraints, lists, basic types, literals and
// disjunctions of them, bounds, regular expressions, strings.MinRunes/
// MaxRunes, list.MinItems/MaxItems, struct.MinFields/MaxFields and
// time.Time. Whatever it cannot translate becomes a node that checks that
// subtree with CUE (cueNode); TestCompiledSchemasFallBackOnlyWhereListed
// keeps the list of those short, and TestCompiledSchemaRejectsWhatCUERejects
// proves the compiled check rejects every mutation of every golden object
// that the CUE check rejects.

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
	// fallback checks this subtree with CUE: the compiler could not
	// translate it faithfully.
	fallback *cueNode
}

type fieldNode struct {
	node *schemaNode
}

func newNode() *schemaNode { return &schemaNode{kinds: kindAll, maxFields: -1, maxItems: -1} }

// cueNode is a subtree of a schema checked with CUE.
type cueNode struct {
	schema cue.Value
	ctx    *cue.Context
	why    string
}

// scalarCheck is one constraint on a scalar; it returns a message when v
// breaks it.
type scalarCheck interface {
	check(v any) string
}

// compiledSchema is the compiled check of one registry kind.
type compiledSchema struct {
	root      *schemaNode
	fallbacks []string // "path: why" of every cueNode
}

// schemaCompiler translates one registry schema.
type schemaCompiler struct {
	ctx       *cue.Context
	fallbacks []string
	probes    []probe
	inDisj    int // > 0 while compiling inside a disjunction or a fallback-free alternative
}

// probe is a struct node whose closedness CUE decides (probeClosedness).
type probe struct {
	node *schemaNode
	path []any // string field names, or 0 for a list element
	v    cue.Value
}

// probeKey is the field name the closedness probe adds; no schema
// declares it.
const probeKey = "scribe_probe_"

// compileSchema translates schema (a registry kinds[...] value).
func compileSchema(ctx *cue.Context, schema cue.Value) (*compiledSchema, error) {
	c := &schemaCompiler{ctx: ctx}
	root := c.compile(schema, nil, 0)
	if err := c.probeClosedness(schema); err != nil {
		return nil, err
	}
	sort.Strings(c.fallbacks)
	return &compiledSchema{root: root, fallbacks: c.fallbacks}, nil
}

const maxSchemaDepth = 64

func pathString(path []any) string {
	var b strings.Builder
	for _, p := range path {
		switch p := p.(type) {
		case string:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(p)
		default:
			b.WriteString("[]")
		}
	}
	return b.String()
}

func (c *schemaCompiler) fallback(v cue.Value, path []any, why string) *schemaNode {
	n := newNode()
	n.fallback = &cueNode{schema: v, ctx: c.ctx, why: why}
	c.fallbacks = append(c.fallbacks, pathString(path)+": "+why)
	return n
}

// compile translates v, the schema at path.
func (c *schemaCompiler) compile(v cue.Value, path []any, depth int) *schemaNode {
	if depth > maxSchemaDepth {
		return c.fallback(v, path, "deeper than the compiler follows")
	}
	// An error in the schema itself (not one that is only incomplete,
	// such as struct.MinFields on a schema struct) allows no value.
	if err := v.Err(); err != nil && v.IsConcrete() {
		n := newNode()
		n.never = cueerrors.Details(err, nil)
		n.kinds = 0
		return n
	}
	k := v.IncompleteKind()
	if opOf(v) == cue.CallOp {
		return c.compileExpr(v, path, depth) // a validator of a struct or list
	}
	switch k {
	case cue.StructKind:
		return c.compileStruct(v, path, depth)
	case cue.ListKind:
		return c.compileList(v, path, depth)
	}
	return c.compileExpr(v, path, depth)
}

// constraintsOf follows conjunctions and references of a struct or list
// schema and returns the validator calls and whether it met a disjunction.
func (c *schemaCompiler) constraintsOf(v cue.Value, depth int) (calls [][]cue.Value, disj bool, other string) {
	if depth > maxSchemaDepth {
		return nil, false, "deep reference chain"
	}
	op, args := v.Expr()
	switch op {
	case cue.NoOp:
		return nil, false, ""
	case cue.AndOp:
		for _, a := range args {
			cs, d, o := c.constraintsOf(a, depth+1)
			calls = append(calls, cs...)
			disj = disj || d
			if o != "" {
				other = o
			}
		}
		return calls, disj, other
	case cue.OrOp:
		return nil, true, ""
	case cue.SelectorOp:
		r, ok := resolveSelector(v, args)
		if !ok {
			return nil, false, "unresolved reference " + fmt.Sprint(v)
		}
		return c.constraintsOf(r, depth+1)
	case cue.CallOp:
		return [][]cue.Value{args}, false, ""
	}
	return nil, false, fmt.Sprintf("operator %v", op)
}

// resolveSelector returns the value a reference v (with the arguments of
// its SelectorOp) stands for.
func resolveSelector(v cue.Value, args []cue.Value) (cue.Value, bool) {
	if r := v.Eval(); r.Exists() && opOf(r) != cue.SelectorOp {
		return r, true
	}
	if len(args) != 2 {
		return cue.Value{}, false
	}
	name, err := args[1].String()
	if err != nil {
		return cue.Value{}, false
	}
	var sel cue.Selector
	if strings.HasPrefix(name, "#") {
		sel = cue.Def(name)
	} else {
		p := cue.ParsePath(name)
		if p.Err() != nil || len(p.Selectors()) != 1 {
			sel = cue.Str(name)
		} else {
			sel = p.Selectors()[0]
		}
	}
	r := args[0].LookupPath(cue.MakePath(sel))
	return r, r.Exists()
}

// applyCalls adds the validator calls of a struct or list to n; it
// returns a reason when one is not known.
func applyCalls(n *schemaNode, calls [][]cue.Value) string {
	for _, call := range calls {
		name := strings.TrimSuffix(fmt.Sprint(call[0]), "()")
		var arg int64
		if len(call) == 2 {
			a, err := call[1].Int64()
			if err != nil {
				return "call " + name + " with a non-integer argument"
			}
			arg = a
		}
		switch {
		case name == "list.MaxItems" && len(call) == 2:
			n.maxItems = int(arg)
		case name == "list.MinItems" && len(call) == 2:
			n.minItems = int(arg)
		case name == "struct.MaxFields" && len(call) == 2:
			n.maxFields = int(arg)
		case name == "struct.MinFields" && len(call) == 2:
			n.minFields = int(arg)
		default:
			return "validator " + name
		}
	}
	return ""
}

func (c *schemaCompiler) compileStruct(v cue.Value, path []any, depth int) *schemaNode {
	calls, disj, other := c.constraintsOf(v, 0)
	if other != "" {
		return c.fallback(v, path, other)
	}
	if disj {
		// A disjunction of structs: check it as alternatives.
		return c.compileExpr(v, path, depth)
	}
	n := newNode()
	n.kinds = kindStruct
	if why := applyCalls(n, calls); why != "" {
		return c.fallback(v, path, why)
	}
	it, err := v.Fields(cue.Optional(true))
	if err != nil {
		// A struct with validators (struct.MinFields) is an incomplete
		// error as a schema; its fields are those of its one struct
		// conjunct.
		lit, ok := singleStructConjunct(v)
		if !ok {
			return c.fallback(v, path, "fields: "+err.Error())
		}
		if it, err = lit.Fields(cue.Optional(true)); err != nil {
			return c.fallback(v, path, "fields: "+err.Error())
		}
		v = lit
	}
	n.fields = map[string]*fieldNode{}
	for it.Next() {
		sel := it.Selector()
		if !sel.IsString() {
			continue
		}
		name := sel.Unquoted()
		fv := it.Value()
		fn := &fieldNode{node: c.compile(fv, append(path[:len(path):len(path)], name), depth+1)}
		n.fields[name] = fn
		switch sel.ConstraintType() {
		case cue.RequiredConstraint:
			n.required = append(n.required, name)
		case cue.OptionalConstraint:
		default:
			// A regular field must be concrete in the data, unless the
			// schema gives it a value (or a default).
			if fv.IncompleteKind() == cue.StructKind || fv.IncompleteKind() == cue.ListKind {
				// Absent, it is the schema's own struct or list, which
				// must then be valid by itself.
				n.regular = append(n.regular, name)
				break
			}
			if fv.IsConcrete() {
				break
			}
			if d, ok := fv.Default(); ok && d.IsConcrete() {
				break
			}
			n.required = append(n.required, name)
		}
	}
	sort.Strings(n.required)
	if p := v.LookupPath(cue.MakePath(cue.AnyString)); p.Exists() {
		if p.IncompleteKind() != cue.TopKind || opOf(p) != cue.NoOp {
			n.pattern = c.compile(p, append(path[:len(path):len(path)], "*"), depth+1)
		}
	}
	if c.inDisj > 0 {
		// Not probed: closed unless it has a pattern or `...`.
		n.closed = !v.LookupPath(cue.MakePath(cue.AnyString)).Exists()
		if n.closed && v.Allows(cue.Str(probeKey)) && !v.IsClosed() {
			n.closed = false
		}
	} else {
		c.probes = append(c.probes, probe{node: n, path: append([]any(nil), path...), v: v})
	}
	return n
}

func opOf(v cue.Value) cue.Op {
	op, _ := v.Expr()
	return op
}

func (c *schemaCompiler) compileList(v cue.Value, path []any, depth int) *schemaNode {
	calls, disj, other := c.constraintsOf(v, 0)
	if other != "" {
		return c.fallback(v, path, other)
	}
	if disj {
		return c.compileExpr(v, path, depth)
	}
	n := newNode()
	n.kinds = kindList
	n.isList = true
	if why := applyCalls(n, calls); why != "" {
		return c.fallback(v, path, why)
	}
	it, err := v.List()
	if err != nil {
		return c.fallback(v, path, "list: "+err.Error())
	}
	for i := 0; it.Next(); i++ {
		c.inDisj++ // prefix elements are not probed
		n.prefix = append(n.prefix, c.compile(it.Value(), append(path[:len(path):len(path)], i), depth+1))
		c.inDisj--
	}
	if e := v.LookupPath(cue.MakePath(cue.AnyIndex)); e.Exists() {
		if len(n.prefix) > 0 {
			c.inDisj++
		}
		n.elem = c.compile(e, append(path[:len(path):len(path)], 0), depth+1)
		if len(n.prefix) > 0 {
			c.inDisj--
		}
	}
	return n
}

// compileExpr translates a scalar (or mixed-kind) schema from its expression.
func (c *schemaCompiler) compileExpr(v cue.Value, path []any, depth int) *schemaNode {
	if depth > maxSchemaDepth {
		return c.fallback(v, path, "deeper than the compiler follows")
	}
	op, args := v.Expr()
	switch op {
	case cue.NoOp:
		if v.IsConcrete() {
			switch v.Kind() {
			case cue.StructKind:
				return c.compileStruct(v, path, depth)
			case cue.ListKind:
				return c.compileList(v, path, depth)
			}
			lit, ok := literalOf(v)
			if !ok {
				return c.fallback(v, path, "literal "+fmt.Sprint(v))
			}
			n := newNode()
			n.kinds = lit.kind
			n.checks = []scalarCheck{lit}
			return n
		}
		k := v.IncompleteKind()
		switch k {
		case cue.StructKind:
			return c.compileStruct(v, path, depth)
		case cue.ListKind:
			return c.compileList(v, path, depth)
		}
		kinds, ok := kindsOf(k)
		if !ok {
			return c.fallback(v, path, "kind "+k.String())
		}
		if kinds&(kindStruct|kindList) != 0 && kinds != kindAll {
			return c.fallback(v, path, "mixed kind "+k.String())
		}
		n := newNode()
		n.kinds = kinds
		return n
	case cue.AndOp:
		n := newNode()
		for _, a := range args {
			m := c.compile(a, path, depth+1)
			n = mergeAnd(n, m)
		}
		return n
	case cue.OrOp:
		n := newNode()
		c.inDisj++
		var kinds uint8
		for _, a := range args {
			alt := c.compile(a, path, depth+1)
			n.anyOf = append(n.anyOf, alt)
			kinds |= alt.kinds
		}
		c.inDisj--
		n.kinds = kinds
		return n
	case cue.SelectorOp:
		r, ok := resolveSelector(v, args)
		if !ok {
			return c.fallback(v, path, "unresolved reference "+fmt.Sprint(v))
		}
		return c.compile(r, path, depth+1)
	case cue.LessThanOp, cue.LessThanEqualOp, cue.GreaterThanOp, cue.GreaterThanEqualOp, cue.NotEqualOp:
		if len(args) != 1 || !args[0].IsConcrete() {
			return c.fallback(v, path, "bound "+fmt.Sprint(v))
		}
		lit, ok := literalOf(args[0])
		if !ok {
			return c.fallback(v, path, "bound "+fmt.Sprint(v))
		}
		n := newNode()
		n.checks = []scalarCheck{boundCheck{op: op, lit: lit, src: fmt.Sprint(v)}}
		if op != cue.NotEqualOp {
			if lit.kind&kindNumber != 0 {
				n.kinds = kindNumber
			} else {
				n.kinds = lit.kind
			}
		}
		return n
	case cue.RegexMatchOp, cue.NotRegexMatchOp:
		if len(args) != 1 {
			return c.fallback(v, path, "regexp "+fmt.Sprint(v))
		}
		s, err := args[0].String()
		if err != nil {
			return c.fallback(v, path, "regexp "+fmt.Sprint(v))
		}
		re, err := regexp.Compile(s)
		if err != nil {
			return c.fallback(v, path, "regexp "+s)
		}
		n := newNode()
		n.kinds = kindString
		n.checks = []scalarCheck{regexCheck{re: re, neg: op == cue.NotRegexMatchOp, src: fmt.Sprint(v)}}
		return n
	case cue.CallOp:
		name := strings.TrimSuffix(fmt.Sprint(args[0]), "()")
		if name == "matchN" && len(args) == 3 {
			return c.compileMatchN(v, args, path, depth)
		}
		var arg int64
		var err error
		if len(args) == 2 {
			arg, err = args[1].Int64()
		}
		n := newNode()
		switch {
		case err != nil:
		case (name == "strings.MaxRunes" || name == "strings.MinRunes") && len(args) == 2:
			n.kinds = kindString
			n.checks = []scalarCheck{runesCheck{max: name == "strings.MaxRunes", n: int(arg)}}
			return n
		case name == "list.MaxItems" && len(args) == 2:
			n.kinds = kindList
			n.maxItems = int(arg)
			return n
		case name == "list.MinItems" && len(args) == 2:
			n.kinds = kindList
			n.minItems = int(arg)
			return n
		case name == "struct.MaxFields" && len(args) == 2:
			n.kinds = kindStruct
			n.maxFields = int(arg)
			return n
		case name == "struct.MinFields" && len(args) == 2:
			n.kinds = kindStruct
			n.minFields = int(arg)
			return n
		case name == "time.Time" && len(args) == 1:
			n.kinds = kindString
			n.checks = []scalarCheck{timeCheck{}}
			return n
		case name == "net.AbsURL" && len(args) == 1:
			n.kinds = kindString
			n.checks = []scalarCheck{absURLCheck{}}
			return n
		}
		return c.fallback(v, path, fmt.Sprintf("call %v (%q/%d)", v, name, len(args)))
	}
	return c.fallback(v, path, fmt.Sprintf("operator %v in %v", op, v))
}

// mergeAnd returns the conjunction of a and b.
func mergeAnd(a, b *schemaNode) *schemaNode {
	if isPlainScalar(a) && isPlainScalar(b) {
		a.kinds &= b.kinds
		a.checks = append(a.checks, b.checks...)
		if a.minItems < b.minItems {
			a.minItems = b.minItems
		}
		if b.maxItems >= 0 && (a.maxItems < 0 || b.maxItems < a.maxItems) {
			a.maxItems = b.maxItems
		}
		if a.minFields < b.minFields {
			a.minFields = b.minFields
		}
		if b.maxFields >= 0 && (a.maxFields < 0 || b.maxFields < a.maxFields) {
			a.maxFields = b.maxFields
		}
		return a
	}
	a.allOf = append(a.allOf, b)
	return a
}

// isPlainScalar: n has only kinds, checks and counts.
func isPlainScalar(n *schemaNode) bool {
	return n.anyOf == nil && n.allOf == nil && n.fields == nil && n.pattern == nil && !n.isList && n.never == "" && n.fallback == nil && n.matchN == nil && !n.closed
}

func kindsOf(k cue.Kind) (uint8, bool) {
	var out uint8
	if k == cue.TopKind {
		return kindAll, true
	}
	if k&cue.NullKind != 0 {
		out |= kindNull
	}
	if k&cue.BoolKind != 0 {
		out |= kindBool
	}
	if k&cue.IntKind != 0 {
		out |= kindInt
	}
	if k&cue.FloatKind != 0 {
		out |= kindFloat
	}
	if k&cue.StringKind != 0 {
		out |= kindString
	}
	if k&cue.ListKind != 0 {
		out |= kindList
	}
	if k&cue.StructKind != 0 {
		out |= kindStruct
	}
	if k&^(cue.NullKind|cue.BoolKind|cue.IntKind|cue.FloatKind|cue.StringKind|cue.ListKind|cue.StructKind) != 0 {
		return 0, false // bytes, functions, bottom
	}
	return out, true
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

func literalOf(v cue.Value) (literal, bool) {
	switch v.Kind() {
	case cue.NullKind:
		return literal{kind: kindNull, s: "null"}, true
	case cue.BoolKind:
		b, _ := v.Bool()
		return literal{kind: kindBool, b: b, s: strconv.FormatBool(b)}, true
	case cue.StringKind:
		s, _ := v.String()
		return literal{kind: kindString, s: s}, true
	case cue.IntKind:
		bi, err := v.Int(nil)
		if err != nil {
			return literal{}, false
		}
		f, _ := new(big.Float).SetInt(bi).Float64()
		return literal{kind: kindInt, i: bi.Int64(), isI: bi.IsInt64(), f: f, s: bi.String()}, true
	case cue.FloatKind:
		f, err := v.Float64()
		if err != nil {
			return literal{}, false
		}
		return literal{kind: kindFloat, f: f, s: fmt.Sprint(v)}, true
	}
	return literal{}, false
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

// probeClosedness asks CUE which struct nodes are closed: one value with
// an unknown field in every probed struct is unified with the schema, and
// every struct where CUE reports that field as not allowed is closed.
// Closedness in CUE depends on how a struct came to be (definitions,
// embeddings, conjunctions such as `& #CRD`), which the Go API does not
// expose reliably on a sub-value; the schema itself answers.
func (c *schemaCompiler) probeClosedness(schema cue.Value) error {
	// CUE reports a struct's own unknown field only once the errors
	// below it are gone, so probe again until no new struct is found
	// closed.
	open := make([]bool, len(c.probes))
	for i := range open {
		open[i] = true
	}
	for pass := 0; ; pass++ {
		doc := map[string]any{}
		n := 0
		for i, p := range c.probes {
			if !open[i] {
				continue
			}
			m, ok := probeParent(doc, p.path)
			if !ok {
				// A shape the probe cannot reach: closed unless it has
				// a pattern (or `...`).
				p.node.closed = !p.v.LookupPath(cue.MakePath(cue.AnyString)).Exists()
				open[i] = false
				continue
			}
			m[probeKey+strconv.Itoa(i)] = probeValue{}
			n++
		}
		if n == 0 {
			return nil
		}
		var src strings.Builder
		writeProbeDoc(&src, doc)
		probeDoc := c.ctx.CompileString(src.String())
		if err := probeDoc.Err(); err != nil {
			return fmt.Errorf("closedness probe: %s", cueerrors.Details(err, nil))
		}
		found := 0
		verr := schema.Unify(probeDoc).Validate(cue.All())
		for _, e := range cueerrors.Errors(verr) {
			format, args := e.Msg()
			if fmt.Sprintf(format, args...) != "field not allowed" {
				continue
			}
			sel := e.Path()
			if len(sel) == 0 {
				continue
			}
			last := strings.Trim(sel[len(sel)-1], `"`)
			i, err := strconv.Atoi(strings.TrimPrefix(last, probeKey))
			if !strings.HasPrefix(last, probeKey) || err != nil || i >= len(c.probes) || !open[i] {
				continue
			}
			c.probes[i].node.closed = true
			open[i] = false
			found++
		}
		if found == 0 {
			return nil
		}
		if pass > maxSchemaDepth {
			return fmt.Errorf("closedness probe: no fixed point")
		}
	}
}

// probeValue is CUE's top (_) in a probe document.
type probeValue struct{}

// writeProbeDoc writes doc as CUE source, probeValue as _.
func writeProbeDoc(b *strings.Builder, v any) {
	switch t := v.(type) {
	case probeValue:
		b.WriteString("_")
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteString("{")
		for i, k := range keys {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(strconv.Quote(k))
			b.WriteString(": ")
			writeProbeDoc(b, t[k])
		}
		b.WriteString("}")
	case []any:
		b.WriteString("[")
		for i, e := range t {
			if i > 0 {
				b.WriteString(", ")
			}
			writeProbeDoc(b, e)
		}
		b.WriteString("]")
	}
}

// probeParent returns the struct of doc at path, creating it (a list
// element is the single element of its list).
func probeParent(doc map[string]any, path []any) (map[string]any, bool) {
	m := doc
	for j := 0; j < len(path); j++ {
		s, ok := path[j].(string)
		if !ok {
			return nil, false
		}
		if j+1 < len(path) {
			if _, elem := path[j+1].(int); elem {
				l, _ := m[s].([]any)
				if l == nil {
					if m[s] != nil {
						return nil, false
					}
					l = []any{map[string]any{}}
					m[s] = l
				}
				next, _ := l[0].(map[string]any)
				if next == nil {
					return nil, false
				}
				m = next
				j++
				continue
			}
		}
		next, _ := m[s].(map[string]any)
		if next == nil {
			if m[s] != nil {
				return nil, false
			}
			next = map[string]any{}
			m[s] = next
		}
		m = next
	}
	return m, true
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
	if n.fallback != nil {
		n.fallback.validate(vd, v)
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

func (c *cueNode) validate(vd *validation, v any) {
	raw, err := json.Marshal(v)
	if err != nil {
		vd.fail(err.Error())
		return
	}
	err = c.schema.Unify(dataValue(c.ctx, raw)).Validate(cue.Concrete(true))
	for _, fe := range cueFieldErrors(err, 0, "") {
		vd.fail(fe.Message)
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

// compileMatchN translates matchN(count, [schemas...]): the number of
// schemas the value matches must satisfy count.
func (c *schemaCompiler) compileMatchN(v cue.Value, args []cue.Value, path []any, depth int) *schemaNode {
	count := c.compileExpr(args[1], path, depth+1)
	if !isPlainScalar(count) || count.kinds&kindNumber == 0 {
		return c.fallback(v, path, "matchN count "+fmt.Sprint(args[1]))
	}
	it, err := args[2].List()
	if err != nil {
		return c.fallback(v, path, "matchN schemas "+fmt.Sprint(args[2]))
	}
	m := &matchN{count: count, src: fmt.Sprint(v)}
	c.inDisj++
	for it.Next() {
		m.schemas = append(m.schemas, c.compile(it.Value(), path, depth+1))
	}
	c.inDisj--
	n := newNode()
	n.matchN = m
	return n
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

// singleStructConjunct returns the one struct conjunct of v when every
// other conjunct is a validator call.
func singleStructConjunct(v cue.Value) (cue.Value, bool) {
	op, args := v.Expr()
	if op != cue.AndOp {
		return cue.Value{}, false
	}
	var lit cue.Value
	n := 0
	for _, a := range args {
		switch aop, aargs := a.Expr(); aop {
		case cue.CallOp:
			continue
		case cue.SelectorOp:
			r, ok := resolveSelector(a, aargs)
			if !ok || opOf(r) != cue.NoOp || r.IncompleteKind() != cue.StructKind {
				return cue.Value{}, false
			}
			lit = r
		case cue.NoOp:
			if a.IncompleteKind() != cue.StructKind {
				return cue.Value{}, false
			}
			lit = a
		case cue.AndOp:
			l, ok := singleStructConjunct(a)
			if !ok {
				return cue.Value{}, false
			}
			lit = l
		default:
			return cue.Value{}, false
		}
		n++
	}
	return lit, n == 1
}
