package controller

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/vm"
)

// A condition is written by whoever writes the analysis template, and it
// runs in the controller, between every tenant's rollouts: its size is
// bounded when it compiles (maxConditionNodes), and what it does when it
// runs is bounded by one budget, exprBudget. expr-lang counts neither the
// bytes string operators and builtins produce nor the steps of a loop, so
// the condition is rewritten when it compiles (budgetPatch): every operator
// and builtin that reads or produces data first charges the budget for it,
// every step of a loop (a predicate: all, map, filter, ...) charges its
// size, and the budget refuses the charge that goes past it, or any charge
// once the round's context is done. Charging happens before the work, so
// a hostile condition stops before it allocates or scans much, whatever
// the machine's load.
const (
	// maxConditionWork is the budget of one evaluation, in units: a byte
	// or value a string or collection operation reads or produces, or a
	// node of a loop's body run once. An honest condition over a 4 MiB
	// answer reads a handful of values; this lets it scan the answer
	// several times over.
	maxConditionWork = 16 << 20
	// maxConditionMemory is expr-lang's own budget (vm.MemoryBudget): the
	// elements of ranges and the loops' scopes; maxConditionWork charges
	// ranges first, so this one is a second guard.
	maxConditionMemory = 1 << 20
)

// The names of the functions the patch calls: not identifiers a
// condition can write, so a condition cannot call or shadow them.
const (
	chargeFunc = "·charge"
	tickFunc   = "·tick"
)

// ErrConditionBudget is the error of a condition that needs more than its
// evaluation budget, or that still runs when the analysis round's time is
// up.
var ErrConditionBudget = errors.New("the condition exceeds its evaluation budget")

// exprBudget is the work one evaluation of a condition may still do.
type exprBudget struct {
	ctx  context.Context
	left int64
	// err is the first refusal: every charge after it is refused too.
	err error
}

func newExprBudget(ctx context.Context, units int64) *exprBudget {
	return &exprBudget{ctx: ctx, left: units}
}

// spend takes n units, or says why not.
func (b *exprBudget) spend(n int64) error {
	if b.err != nil {
		return b.err
	}
	if err := b.ctx.Err(); err != nil {
		b.err = fmt.Errorf("%w: the analysis round ended while it ran (%w)", ErrConditionBudget, err)
		return b.err
	}
	if n < 0 || n > b.left {
		b.err = fmt.Errorf("%w of %d units (a unit is a byte or value read or produced, or a loop body's node run once)", ErrConditionBudget, maxConditionWork)
		b.left = 0
		return b.err
	}
	b.left -= n
	return nil
}

// size is how much of v an operation that walks it reads: a string's
// bytes, a collection's values (and map keys' bytes) counted deeply, 1 for
// anything else. It stops counting past limit; depth is how deep the
// collections nest.
func size(v any, limit int64) (n int64, depth int64) {
	s := sizer{limit: limit}
	s.walk(v, 0)
	return s.n, s.depth
}

type sizer struct {
	n, depth, limit int64
}

func (s *sizer) walk(v any, depth int64) {
	if s.n > s.limit {
		return
	}
	if depth > s.depth {
		s.depth = depth
	}
	switch x := v.(type) {
	case nil, bool, int, int64, float64:
		s.n++
		return
	case string:
		s.n += int64(len(x)) + 1
		return
	case []any:
		s.n++
		for _, e := range x {
			if s.n > s.limit {
				return
			}
			s.walk(e, depth+1)
		}
		return
	case map[string]any:
		s.n++
		for k, e := range x {
			if s.n > s.limit {
				return
			}
			s.n += int64(len(k))
			s.walk(e, depth+1)
		}
		return
	}
	r := reflect.ValueOf(v)
	switch r.Kind() {
	case reflect.String:
		s.n += int64(r.Len()) + 1
	case reflect.Slice, reflect.Array:
		s.n++
		for i := 0; i < r.Len() && s.n <= s.limit; i++ {
			s.walk(r.Index(i).Interface(), depth+1)
		}
	case reflect.Map:
		s.n++
		it := r.MapRange()
		for it.Next() && s.n <= s.limit {
			s.walk(it.Key().Interface(), depth+1)
			s.walk(it.Value().Interface(), depth+1)
		}
	default:
		s.n++
	}
}

// topLen is the number of values v holds at its top (a string's bytes),
// 1 for a scalar.
func topLen(v any) int64 {
	r := reflect.ValueOf(v)
	switch r.Kind() {
	case reflect.String, reflect.Slice, reflect.Array, reflect.Map:
		return int64(r.Len()) + 1
	}
	return 1
}

// charge takes the cost of operation op over its operands, before it runs:
// what it reads and what it produces.
func (b *exprBudget) charge(op string, args ...any) error {
	if b.err != nil {
		return b.err
	}
	limit := b.left + 1
	sz := func(v any) int64 {
		n, _ := size(v, limit)
		return n
	}
	arg := func(i int) any {
		if i < len(args) {
			return args[i]
		}
		return nil
	}
	var cost int64 = 1
	switch op {
	case "len", "type", "first", "last", "get", "abs", "ceil", "floor", "round", "int", "float", "now", "bitnot":
		// Constant time whatever the operand.
		cost = 1
	case "take":
		n, _ := arg(1).(int)
		cost = 1 + int64(max(n, 0))
	case "in":
		if reflect.ValueOf(arg(1)).Kind() == reflect.Map {
			cost = 1 + sz(arg(0))
		} else {
			cost = 1 + sz(arg(0)) + sz(arg(1))
		}
	case "..":
		lo, _ := arg(0).(int)
		hi, _ := arg(1).(int)
		if hi >= lo {
			cost = 1 + int64(hi) - int64(lo)
			if cost <= 0 {
				cost = -1
			}
		}
	case "matches":
		// A pattern built at run time compiles, then matches in time of
		// the text times the pattern.
		cost = mulCost(1+sz(arg(0)), 1+sz(arg(1)))
	case "repeat":
		n, _ := arg(1).(int)
		cost = 1 + mulCost(sz(arg(0)), int64(max(n, 0)))
	case "join":
		cost = 1 + sz(arg(0)) + mulCost(sz(arg(1)), topLen(arg(0)))
	case "replace":
		s := sz(arg(0))
		cost = 1 + s + sz(arg(1)) + mulCost(sz(arg(2)), s+1)
	case "split", "splitAfter":
		// One string header per piece.
		cost = 1 + 4*(sz(arg(0))+sz(arg(1)))
	case "fromJSON":
		// Decoded values take several times their text.
		cost = 1 + 4*sz(arg(0))
	case "toJSON", "string":
		// Indented JSON repeats the indentation of every nested value.
		var total int64
		for _, a := range args {
			n, depth := size(a, limit)
			total += mulCost(n, 1+2*depth)
		}
		cost = 1 + total
	default:
		// Anything else reads its operands once and produces at most
		// as much: +, contains, upper, trim, concat, sort, ...
		for _, a := range args {
			cost += sz(a)
		}
	}
	return b.spend(cost)
}

// mulCost is a*b, saturated at the largest cost.
func mulCost(a, b int64) int64 {
	if a == 0 || b == 0 {
		return 0
	}
	if a > (1<<62)/b {
		return -1
	}
	return a * b
}

// conditionOptions are the compile options that bind a condition to b.
func conditionOptions(b *exprBudget) []expr.Option {
	return []expr.Option{
		expr.MaxNodes(maxConditionNodes),
		// The optimizer folds constants when the condition compiles
		// (`1..100000000` would be built then): the patch charges them
		// at run time instead.
		expr.Optimize(false),
		expr.Patch(&budgetPatch{}),
		expr.Function(chargeFunc, func(params ...any) (any, error) {
			op, _ := params[0].(string)
			if err := b.charge(op, params[1:]...); err != nil {
				return nil, err
			}
			return true, nil
		}, new(func(string, ...any) bool)),
		expr.Function(tickFunc, func(params ...any) (any, error) {
			n, _ := params[0].(int)
			if err := b.spend(int64(n)); err != nil {
				return nil, err
			}
			return true, nil
		}, new(func(int) bool)),
	}
}

// runCondition runs prog within b: an error is the budget's refusal when
// the budget refused, else the condition's own.
func runCondition(prog *vm.Program, env map[string]any, b *exprBudget) (any, error) {
	machine := vm.VM{MemoryBudget: maxConditionMemory}
	out, err := machine.Run(prog, env)
	switch {
	case b.err != nil:
		return nil, b.err
	case err != nil && strings.Contains(err.Error(), "memory budget exceeded"):
		return nil, fmt.Errorf("%w: its ranges and loops hold more than %d values", ErrConditionBudget, maxConditionMemory)
	case err != nil:
		return nil, err
	}
	return out, nil
}

// budgetPatch rewrites a condition so that it charges its budget as it
// runs. An operator or builtin `f(a, b)` becomes
//
//	let ·1 = a; let ·2 = b; (·charge("f", ·1, ·2); f(·1, ·2))
//
// (its operands evaluated once, as before, and its type unchanged), a
// member `x[k]` with a computed key charges the key, and a loop's body
// `{p}` becomes `{·tick(n); p}`, n its size. The short-circuit operators
// (&&, ||, ??) are left alone: they read nothing and must not evaluate
// their right side early.
type budgetPatch struct {
	vars int
}

func (p *budgetPatch) Visit(node *ast.Node) {
	switch n := (*node).(type) {
	case *ast.BinaryNode:
		switch n.Operator {
		case "&&", "||", "and", "or", "??":
			return
		}
		*node = p.guard(n.Operator, []*ast.Node{&n.Left, &n.Right}, n)
	case *ast.BuiltinNode:
		args := make([]*ast.Node, 0, len(n.Arguments))
		for i := range n.Arguments {
			if _, ok := n.Arguments[i].(*ast.PredicateNode); ok {
				// A loop: its steps tick; its collection is walked by
				// the steps.
				return
			}
			args = append(args, &n.Arguments[i])
		}
		*node = p.guard(n.Name, args, n)
	case *ast.PredicateNode:
		weight := 1
		ast.Walk(&n.Node, countNodes{&weight})
		tick := &ast.CallNode{Callee: &ast.IdentifierNode{Value: tickFunc}, Arguments: []ast.Node{&ast.IntegerNode{Value: weight}}}
		n.Node = &ast.SequenceNode{Nodes: []ast.Node{tick, n.Node}}
	case *ast.MemberNode:
		switch n.Property.(type) {
		case *ast.StringNode, *ast.IntegerNode, *ast.ConstantNode:
			return
		}
		if n.Method {
			return
		}
		*node = p.guard("[]", []*ast.Node{&n.Property}, n)
	}
}

// guard binds the operands to fresh variables, charges op over them, then
// runs n over the variables.
func (p *budgetPatch) guard(op string, operands []*ast.Node, n ast.Node) ast.Node {
	type binding struct {
		name  string
		value ast.Node
	}
	bound := make([]binding, 0, len(operands))
	call := &ast.CallNode{Callee: &ast.IdentifierNode{Value: chargeFunc}, Arguments: []ast.Node{&ast.StringNode{Value: op}}}
	for _, o := range operands {
		p.vars++
		name := fmt.Sprintf("·%d", p.vars)
		bound = append(bound, binding{name: name, value: *o})
		*o = &ast.IdentifierNode{Value: name}
		call.Arguments = append(call.Arguments, &ast.IdentifierNode{Value: name})
	}
	var out ast.Node = &ast.SequenceNode{Nodes: []ast.Node{call, n}}
	for i := len(bound) - 1; i >= 0; i-- {
		out = &ast.VariableDeclaratorNode{Name: bound[i].name, Value: bound[i].value, Expr: out}
	}
	return out
}

// countNodes counts the nodes it visits.
type countNodes struct{ n *int }

func (c countNodes) Visit(*ast.Node) { *c.n++ }
