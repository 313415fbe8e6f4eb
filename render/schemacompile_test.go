package render

import (
	"fmt"
	"math/big"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"cuelang.org/go/cue"
	cueerrors "cuelang.org/go/cue/errors"
)

// The translation of a registry schema (a CUE value) into schemaNodes. It
// covers what the generated schemas use: closed structs (closedness as CUE
// itself decides it, see probeClosedness), required and regular fields,
// pattern constraints, lists, basic types (bytes as the base64 string the
// apiserver decodes), literals and disjunctions of them, bounds, regular
// expressions, strings.MinRunes/MaxRunes, list.MinItems/MaxItems,
// struct.MinFields/MaxFields, matchN, time.Time and net.AbsURL. It runs
// when the embedded checks are generated (`make generate`) and in tests,
// never in a render.

// schemaCompiler translates one registry schema.
type schemaCompiler struct {
	ctx          *cue.Context
	untranslated []string
	probes       []probe
	inDisj       int // > 0 while compiling inside a disjunction or a fallback-free alternative
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
	sort.Strings(c.untranslated)
	return &compiledSchema{root: root, untranslated: c.untranslated}, nil
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

// fallback marks the subtree at path as one the compiler cannot
// translate; compileSchema reports it and such a schema is not embedded.
func (c *schemaCompiler) fallback(_ cue.Value, path []any, why string) *schemaNode {
	n := newNode()
	n.untranslated = why
	c.untranslated = append(c.untranslated, pathString(path)+": "+why)
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
		case cue.BytesKind:
			// A Go []byte: JSON carries it as base64 (ConfigMap binaryData).
			n := newNode()
			n.kinds = kindString
			n.checks = []scalarCheck{base64Check{}}
			return n
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
	return n.anyOf == nil && n.allOf == nil && n.fields == nil && n.pattern == nil && !n.isList && n.never == "" && n.untranslated == "" && n.matchN == nil && !n.closed
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
