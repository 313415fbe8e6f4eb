package gitsink

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"text/template"
	"text/template/parse"
	"time"

	"github.com/scribe-gitops/scribe/internal/publish"
)

// Bounds of one commit message template execution: whoever writes the
// template (a --message-template flag, a Repository's
// spec.git.commitTemplate) cannot make Scribe loop, allocate or write
// without end.
const (
	// MaxTemplateOutput is the most bytes a template may write.
	MaxTemplateOutput = 64 << 10
	// maxTemplateWork is the most bytes the template's string functions
	// (print, printf, println, html, js, urlquery) may produce in all.
	maxTemplateWork = 4 << 20
	// TemplateTimeout is the most time an execution may take.
	TemplateTimeout = 2 * time.Second
	// maxRangeDepth is how deeply range actions may nest: each ranges over
	// a list of the data, whose length Scribe bounds.
	maxRangeDepth = 2
)

// errTemplateBound is wrapped by every error of a bound being hit.
var errTemplateBound = errors.New("exceeds its bounds")

// scribeTrailer matches a line a commit's trailer parser would read as one
// of Scribe's own trailers (Scribe-Object:, scribe-digest :, ...).
var scribeTrailer = regexp.MustCompile(`(?im)^[ \t]*scribe-[a-z0-9-]*[ \t]*:`)

// neutralizeTrailers quotes ("> ") every line of s that a trailer parser
// would read as one of Scribe's trailers, so text that did not come from
// Scribe's own code (a reason, a check's message) cannot forge them.
func neutralizeTrailers(s string) string {
	return scribeTrailer.ReplaceAllStringFunc(s, func(m string) string { return "> " + strings.TrimLeft(m, " \t") })
}

// commitTemplate is a parsed commit message template and the name it is
// given in errors (the flag or field it came from).
type commitTemplate struct {
	name string
	tree *template.Template
	// timeout bounds one execution: TemplateTimeout, shorter in tests.
	timeout time.Duration
}

// parseCommitTemplate parses text and checks the shape that keeps its
// execution bounded: every range ranges over the data (a field or a
// variable), never over a number or a function's result, at most
// maxRangeDepth deep, and no template invokes another (recursion would be
// unbounded).
func parseCommitTemplate(name, text string) (*commitTemplate, error) {
	t, err := template.New("commit").Option("missingkey=error").Funcs(boundedFuncs(nil)).Parse(text)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var roots []*parse.ListNode
	for _, tt := range t.Templates() {
		if tt.Tree != nil && tt.Root != nil {
			roots = append(roots, tt.Root)
		}
	}
	c := &shapeCheck{notData: map[string]bool{}}
	// Which variables may hold something other than the data (a number, a
	// function's result): assignments propagate it, so iterate.
	for changed := true; changed; {
		changed = false
		for _, r := range roots {
			walkPipes(r, func(p *parse.PipeNode, isRange bool) {
				if isRange || c.isData(p) {
					return
				}
				for _, v := range p.Decl {
					if !c.notData[v.Ident[0]] {
						c.notData[v.Ident[0]] = true
						changed = true
					}
				}
			})
		}
	}
	for _, r := range roots {
		if err := c.check(r, 0); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	return &commitTemplate{name: name, tree: t, timeout: TemplateTimeout}, nil
}

// shapeCheck checks a template's actions; notData holds the variables
// that may hold something other than the data.
type shapeCheck struct {
	notData map[string]bool
}

// walkPipes calls f with every pipeline that declares or assigns
// variables, and whether it is a range's.
func walkPipes(n parse.Node, f func(p *parse.PipeNode, isRange bool)) {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return
		}
		for _, c := range n.Nodes {
			walkPipes(c, f)
		}
	case *parse.ActionNode:
		f(n.Pipe, false)
	case *parse.IfNode:
		f(n.Pipe, false)
		walkPipes(n.List, f)
		walkPipes(n.ElseList, f)
	case *parse.WithNode:
		f(n.Pipe, false)
		walkPipes(n.List, f)
		walkPipes(n.ElseList, f)
	case *parse.RangeNode:
		f(n.Pipe, true)
		walkPipes(n.List, f)
		walkPipes(n.ElseList, f)
	}
}

func (c *shapeCheck) check(n parse.Node, depth int) error {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return nil
		}
		for _, x := range n.Nodes {
			if err := c.check(x, depth); err != nil {
				return err
			}
		}
	case *parse.RangeNode:
		if depth+1 > maxRangeDepth {
			return fmt.Errorf("line %d: range nested more than %d deep", n.Line, maxRangeDepth)
		}
		if !c.isData(n.Pipe) {
			return fmt.Errorf("line %d: range over %s: a range must be over a list of the data (such as .Changes), not a number or a function's result", n.Line, n.Pipe)
		}
		if err := c.check(n.List, depth+1); err != nil {
			return err
		}
		return c.check(n.ElseList, depth)
	case *parse.IfNode:
		if err := c.check(n.List, depth); err != nil {
			return err
		}
		return c.check(n.ElseList, depth)
	case *parse.WithNode:
		if err := c.check(n.List, depth); err != nil {
			return err
		}
		return c.check(n.ElseList, depth)
	case *parse.TemplateNode:
		return fmt.Errorf("line %d: {{template %q}}: a commit message template cannot invoke templates", n.Line, n.Name)
	}
	return nil
}

// isData says whether a pipeline is one field, dot or variable expression
// of the data (.Changes, $c, $.Changes), not a number, a function's
// result or a variable that may hold one.
func (c *shapeCheck) isData(p *parse.PipeNode) bool {
	if p == nil || len(p.Cmds) != 1 || len(p.Cmds[0].Args) != 1 {
		return false
	}
	switch a := p.Cmds[0].Args[0].(type) {
	case *parse.FieldNode, *parse.DotNode:
		return true
	case *parse.VariableNode:
		return !c.notData[a.Ident[0]]
	}
	return false
}

// execute runs the template on info within MaxTemplateOutput bytes and
// TemplateTimeout, and refuses output holding one of Scribe's trailers
// (Scribe writes those itself, one set per change).
func (c *commitTemplate) execute(info CommitInfo) (string, error) {
	b := &templateBudget{deadline: time.Now().Add(c.timeout), timeout: c.timeout}
	t, err := c.tree.Clone()
	if err != nil {
		return "", fmt.Errorf("%s: %w", c.name, err)
	}
	t.Funcs(boundedFuncs(b))
	var out strings.Builder
	if err := t.Execute(&boundedWriter{w: &out, b: b}, info); err != nil {
		if b.err != nil {
			err = b.err
		}
		return "", fmt.Errorf("%s: %w", c.name, err)
	}
	if loc := scribeTrailer.FindStringIndex(out.String()); loc != nil {
		line := strings.TrimSpace(out.String()[loc[0]:loc[1]])
		return "", fmt.Errorf("%s: writes %q: the Scribe-* trailers are Scribe's own, appended once per change; a template cannot write them", c.name, line)
	}
	return out.String(), nil
}

// templateBudget is what one execution may still spend.
type templateBudget struct {
	deadline time.Time
	timeout  time.Duration
	written  int
	work     int
	err      error
}

// spend charges n bytes of work and checks the clock.
func (b *templateBudget) spend(n int) error {
	if b == nil {
		return nil
	}
	b.work += n
	switch {
	case b.err != nil:
	case b.work > maxTemplateWork:
		b.err = fmt.Errorf("%w: its functions produced more than %d bytes", errTemplateBound, maxTemplateWork)
	case time.Now().After(b.deadline):
		b.err = fmt.Errorf("%w: it ran longer than %s", errTemplateBound, b.timeout)
	}
	return b.err
}

type boundedWriter struct {
	w io.Writer
	b *templateBudget
}

func (w *boundedWriter) Write(p []byte) (int, error) {
	if err := w.b.spend(0); err != nil {
		return 0, err
	}
	w.b.written += len(p)
	if w.b.written > MaxTemplateOutput {
		w.b.err = fmt.Errorf("%w: it wrote more than %d bytes", errTemplateBound, MaxTemplateOutput)
		return 0, w.b.err
	}
	return w.w.Write(p)
}

// boundedFuncs replaces text/template's string-building builtins with
// versions that refuse arguments or results beyond the bounds and charge
// b (nil at parse time, when they only need to exist).
func boundedFuncs(b *templateBudget) template.FuncMap {
	wrap := func(f func(...any) string) func(...any) (string, error) {
		return func(args ...any) (string, error) {
			for _, a := range args {
				if s, ok := a.(string); ok && len(s) > MaxTemplateOutput {
					return "", fmt.Errorf("%w: an argument of %d bytes", errTemplateBound, len(s))
				}
			}
			s := f(args...)
			if len(s) > MaxTemplateOutput {
				return "", fmt.Errorf("%w: a result of %d bytes", errTemplateBound, len(s))
			}
			return s, b.spend(len(s))
		}
	}
	return template.FuncMap{
		"print":   wrap(fmt.Sprint),
		"println": wrap(fmt.Sprintln),
		"printf": func(format string, args ...any) (string, error) {
			if len(format) > MaxTemplateOutput {
				return "", fmt.Errorf("%w: a format of %d bytes", errTemplateBound, len(format))
			}
			return wrap(func(a ...any) string { return fmt.Sprintf(format, a...) })(args...)
		},
		"html":     wrap(template.HTMLEscaper),
		"js":       wrap(template.JSEscaper),
		"urlquery": wrap(template.URLQueryEscaper),
	}
}

// CommitInfo is the data of a commit message template.
type CommitInfo struct {
	Branch  string
	Path    string
	Changes []ChangeInfo
}

// ChangeInfo describes one change of a commit.
type ChangeInfo struct {
	Action     string // "update" or "delete"
	Object     string // Kind/namespace/name
	Kind       string
	Namespace  string
	Name       string
	Generation int64
	Digest     string
	Reason     string
	Dir        string // repository-relative owned directory
}

// Trailer keys Scribe writes into every commit, once per change.
const (
	TrailerObject     = "Scribe-Object"
	TrailerGeneration = "Scribe-Generation"
	TrailerDigest     = "Scribe-Digest"
)

// message builds the commit message: the subject and body (from the
// template, if any), then one block of trailers per change.
func (s *gitSink) message(branch string, edits []pathChange, changed map[string]bool) (string, error) {
	info := CommitInfo{Branch: branch, Path: s.opts.Path}
	for _, pc := range edits {
		if !changed[pc.RepoPath+"\x00"+publish.ObjectRef(pc.Source)] {
			continue
		}
		ci := ChangeInfo{
			Action: "update", Object: publish.ObjectRef(pc.Source), Kind: pc.Source.Kind,
			Namespace: pc.Source.Namespace, Name: pc.Source.Name, Generation: pc.Generation,
			Reason: neutralizeTrailers(pc.Reason), Dir: pc.dir(),
		}
		if pc.Delete {
			ci.Action = "delete"
		} else {
			ci.Digest = pc.Bundle.Digest
		}
		info.Changes = append(info.Changes, ci)
	}
	var b strings.Builder
	if s.tmpl != nil {
		out, err := s.tmpl.execute(info)
		if err != nil {
			return "", &publish.Error{Reason: publish.ReasonInvalid, Op: "publish to", URL: redactURL(s.opts.URL), Err: err}
		}
		b.WriteString(out)
	} else {
		defaultMessage(&b, info)
	}
	var text strings.Builder
	text.WriteString(strings.TrimRight(b.String(), "\n") + "\n\n")
	for i, ci := range info.Changes {
		if i > 0 {
			text.WriteString("\n")
		}
		fmt.Fprintf(&text, "%s: %s\n%s: %d\n", TrailerObject, ci.Object, TrailerGeneration, ci.Generation)
		if ci.Digest != "" {
			fmt.Fprintf(&text, "%s: %s\n", TrailerDigest, ci.Digest)
		}
	}
	return text.String(), nil
}

func defaultMessage(w io.Writer, info CommitInfo) {
	short := func(d string) string {
		if i := strings.IndexByte(d, ':'); i >= 0 && len(d) > i+13 {
			return d[:i+13]
		}
		return d
	}
	if len(info.Changes) == 1 {
		ci := info.Changes[0]
		if ci.Action == "delete" {
			_, _ = fmt.Fprintf(w, "scribe: delete %s %s/%s\n\nRemove %s/ and %s.sync.yaml.\n", ci.Kind, ci.Namespace, ci.Name, ci.Dir, ci.Dir)
		} else {
			_, _ = fmt.Fprintf(w, "scribe: update %s %s/%s to %s (generation %d)\n\nRender %s into %s/.\n", ci.Kind, ci.Namespace, ci.Name, short(ci.Digest), ci.Generation, ci.Digest, ci.Dir)
		}
		if ci.Reason != "" {
			_, _ = fmt.Fprintf(w, "\n%s\n", ci.Reason)
		}
		return
	}
	_, _ = fmt.Fprintf(w, "scribe: publish %d objects\n\n", len(info.Changes))
	for _, ci := range info.Changes {
		if ci.Action == "delete" {
			_, _ = fmt.Fprintf(w, "- delete %s\n", ci.Object)
		} else {
			_, _ = fmt.Fprintf(w, "- update %s to %s (generation %d)\n", ci.Object, short(ci.Digest), ci.Generation)
		}
		if ci.Reason != "" {
			_, _ = fmt.Fprintf(w, "  %s\n", ci.Reason)
		}
	}
}

// Trailers returns the Scribe trailer blocks of a commit message: one map
// per change, keyed by trailer name.
func Trailers(message string) []map[string]string {
	var out []map[string]string
	var cur map[string]string
	for _, line := range strings.Split(message, "\n") {
		k, v, ok := strings.Cut(line, ": ")
		if !ok || (k != TrailerObject && k != TrailerGeneration && k != TrailerDigest) {
			continue
		}
		if k == TrailerObject {
			cur = map[string]string{}
			out = append(out, cur)
		}
		if cur != nil {
			cur[k] = v
		}
	}
	return out
}
