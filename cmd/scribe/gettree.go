package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/controller"
	"github.com/scribe-gitops/scribe/internal/termtext"
)

// appliedRevision is what the applier reports about a custom resource's
// sync object (its Flux Kustomization or Argo CD Application, the first
// of status.generatedResources.objects).
type appliedRevision struct {
	// Object is the sync object, as Kind namespace/name; empty when status
	// names none yet.
	Object string
	// Revision is the Kustomization's status.lastAppliedRevision or the
	// Application's status.sync.revision.
	Revision string
	// Note says why there is no revision (not found, not readable).
	Note string
}

// treeWriter writes the lines of a tree. Every value from the API server
// goes through clean: status text comes from remote servers (metric
// providers, Git hosts, appliers) and must not reach the terminal as
// control sequences.
type treeWriter struct{ b strings.Builder }

// field writes `label: value` aligned like kubectl describe.
func (t *treeWriter) field(label, value string) {
	fmt.Fprintf(&t.b, "%-13s %s\n", label+":", value)
}

// line writes one line (the caller cleaned its parts); a line whose
// status text follows only the tree's indentation cannot start a CI
// workflow command either (termtext.CILine).
func (t *treeWriter) line(s string) {
	t.b.WriteString(termtext.CILine(strings.TrimRight(s, " ")) + "\n")
}

// branch writes the i-th of n children under prefix, and returns the
// prefix of that child's own children.
func (t *treeWriter) branch(prefix string, i, n int, s string) string {
	if i == n-1 {
		t.line(prefix + "└── " + s)
		return prefix + "    "
	}
	t.line(prefix + "├── " + s)
	return prefix + "│   "
}

func (t *treeWriter) String() string { return t.b.String() }

// clean makes s safe to print on one terminal line (termtext.Line):
// control and format characters (escape sequences, carriage returns,
// newlines, tabs, bidirectional overrides) and invalid UTF-8 are written
// as visible escapes, such as \x1b, \n or \u202e.
func clean(s string) string { return termtext.Line(s) }

// unsafeRune says r must not reach a terminal as is.
func unsafeRune(r rune) bool { return termtext.Unsafe(r) }

// orNone is s cleaned, or "-" when empty.
func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return clean(s)
}

// readyOf is the Ready condition as `Status: message`.
func readyOf(conds []metav1.Condition) string {
	c := findCondition(conds, "Ready")
	if c == nil {
		return "-"
	}
	s := clean(string(c.Status))
	if c.Reason != "" {
		s += " (" + clean(c.Reason) + ")"
	}
	if c.Message != "" {
		s += " " + clean(c.Message)
	}
	return s
}

func findCondition(conds []metav1.Condition, typ string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}

// pullRequestOf is `#N URL (state)`.
func pullRequestOf(pr *scribev1.PullRequestStatus) string {
	s := "#" + strconv.Itoa(pr.Number)
	if pr.URL != "" {
		s += " " + clean(pr.URL)
	}
	if pr.State != "" {
		s += " (" + clean(pr.State) + ")"
	}
	return s
}

// renderWorkload is the tree of one Workload: its phase, versions and
// weights, step, checks, pull request and revisions. applied is what the
// applier reports (nil: not read).
func renderWorkload(w *scribev1.Workload, applied *appliedRevision) string {
	var t treeWriter
	st := &w.Status
	t.field("Workload", clean(w.Namespace+"/"+w.Name))
	t.field("Phase", orNone(string(st.Phase)))
	t.field("Ready", readyOf(st.Conditions))
	if st.Message != "" {
		t.field("Message", clean(st.Message))
	}
	suspended(&t, w.Spec.Suspend)
	if w.Spec.Paused {
		t.field("Paused", "spec.paused holds the rollout at its step (scribe resume)")
	}
	if c := findCondition(st.Conditions, scribev1.ReconcilingCondition); c != nil && c.Reason == controller.ReasonAwaitingPromotion {
		t.field("Gate", "held until promoted (scribe promote)")
	}
	strategy := scribev1.StrategyCanary
	promotion := scribev1.PromotionAuto
	if ro := w.Spec.Rollout; ro != nil {
		if ro.Strategy != "" {
			strategy = ro.Strategy
		}
		if ro.Promotion != "" {
			promotion = ro.Promotion
		}
	}
	t.field("Strategy", clean(string(strategy))+", promotion "+clean(string(promotion)))
	t.field("Step", stepOf(w))

	weights := map[string]int32{}
	for _, tr := range st.Traffic {
		weights[tr.Version] = tr.Weight
	}
	type row struct{ version, role string }
	var rows []row
	seen := map[string]bool{}
	add := func(v, role string) {
		if v == "" || seen[v] {
			return
		}
		seen[v] = true
		rows = append(rows, row{v, role})
	}
	add(st.StableVersion, "stable")
	add(st.CanaryVersion, "canary")
	for _, tr := range st.Traffic {
		add(tr.Version, "")
	}
	add(st.RolledBackVersion, "rolled back")
	t.line("Versions:")
	if len(rows) == 0 {
		t.line("└── (none yet)")
	}
	for i, r := range rows {
		s := clean(r.version)
		if r.role != "" {
			s += "  " + r.role
		}
		if r.version == st.RolledBackVersion && r.role != "rolled back" {
			s += ", rolled back"
		}
		if wt, ok := weights[r.version]; ok {
			s += "  weight " + strconv.Itoa(int(wt))
		} else {
			s += "  no traffic"
		}
		t.branch("", i, len(rows), s)
	}

	if len(st.Checks) > 0 {
		t.line(fmt.Sprintf("Checks: (failed rounds %d, inconclusive in a row %d)", st.FailedChecks, st.InconclusiveChecks))
		for i, c := range st.Checks {
			verdict := "failed"
			switch {
			case c.Inconclusive:
				verdict = "inconclusive"
			case c.Passed:
				verdict = "passed"
			}
			s := clean(c.Name) + "  " + verdict
			if c.Provider != "" {
				s += "  " + clean(string(c.Provider))
			}
			if c.Value != "" {
				s += "  value " + clean(c.Value)
			}
			if c.Condition != "" {
				s += "  want " + clean(c.Condition)
			}
			p := t.branch("", i, len(st.Checks), s)
			if c.Message != "" {
				t.line(p + clean(c.Message))
			}
		}
	}
	if st.PullRequest != nil {
		t.field("Pull request", pullRequestOf(st.PullRequest))
	}
	t.field("Revision", revisionOf(st.Revision))
	t.field("Applied", appliedOf(applied))
	if len(st.History) > 0 {
		t.line("History:")
		for i, h := range st.History {
			s := fmt.Sprintf("%s  %s at step %d  %s", clean(h.Version), clean(string(h.Outcome)), h.Step+1, h.FinishedAt.UTC().Format("2006-01-02T15:04:05Z"))
			if h.StartedAt != nil {
				s += fmt.Sprintf(" (%s)", h.FinishedAt.Sub(h.StartedAt.Time).Round(time.Second))
			}
			if h.PullRequest != 0 {
				s += fmt.Sprintf("  #%d", h.PullRequest)
			}
			p := t.branch("", i, len(st.History), s)
			if h.Message != "" {
				t.line(p + clean(h.Message))
			}
		}
	}
	return t.String()
}

// suspended shows spec.suspend when it is set.
func suspended(t *treeWriter, suspend bool) {
	if suspend {
		t.field("Suspended", "spec.suspend: nothing is reconciled (scribe resume)")
	}
}

// stepOf is `k of n` with the canary's weight, the warm-up at weight 0,
// or why there is no step.
func stepOf(w *scribev1.Workload) string {
	st := &w.Status
	if st.CanaryVersion == "" {
		return "- (no rollout in progress)"
	}
	steps := controller.RolloutSteps(w)
	if controller.Warming(w) {
		return fmt.Sprintf("warm-up at weight 0 until %s is available, then 1 of %d (weight %d)", clean(st.CanaryVersion), len(steps), steps[0].Weight)
	}
	if st.Step < 0 || int(st.Step) >= len(steps) {
		return fmt.Sprintf("%d (outside the %d steps of spec.rollout)", st.Step, len(steps))
	}
	s := fmt.Sprintf("%d of %d (weight %d", st.Step+1, len(steps), steps[st.Step].Weight)
	switch p := steps[st.Step].Pause; {
	case p == nil:
	case p.Duration == nil:
		s += ", held until promoted"
	default:
		s += ", pause " + p.Duration.Duration.String()
	}
	s += ")"
	if st.StepHealthyAt != nil {
		s += ", healthy since " + st.StepHealthyAt.UTC().Format("2006-01-02T15:04:05Z")
	}
	return s
}

// revisionOf is status.revision, Scribe's commit; it is empty while a new
// intent is being committed or proposed.
func revisionOf(rev string) string {
	if rev == "" {
		return "- (the current intent is not committed yet)"
	}
	return clean(rev)
}

// appliedOf is the applier's revision and the object it is read from.
func appliedOf(a *appliedRevision) string {
	switch {
	case a == nil:
		return "- (not read)"
	case a.Object == "":
		return "- (status names no sync object yet)"
	case a.Revision == "" && a.Note != "":
		return "- (" + clean(a.Object) + ": " + clean(a.Note) + ")"
	case a.Revision == "":
		return "- (" + clean(a.Object) + " reports none yet)"
	}
	return clean(a.Revision) + " (" + clean(a.Object) + ")"
}

// renderPipeline is the tree of one Pipeline: its version, summary and
// stages.
func renderPipeline(p *scribev1.Pipeline) string {
	var t treeWriter
	st := &p.Status
	t.field("Pipeline", clean(p.Namespace+"/"+p.Name))
	t.field("Ready", readyOf(st.Conditions))
	suspended(&t, p.Spec.Suspend)
	t.field("Version", orNone(st.Version))
	t.field("Summary", orNone(st.Summary))
	t.line("Stages:")
	if len(st.Stages) == 0 {
		t.line("└── (none yet)")
	}
	for i, s := range st.Stages {
		head := clean(s.Name)
		if s.Workload != "" {
			head += "  workload " + clean(s.Workload)
		}
		if s.Phase != "" {
			head += "  " + clean(string(s.Phase))
		}
		prefix := t.branch("", i, len(st.Stages), head)
		t.line(prefix + "admitted " + orNone(s.Admitted) + "  verified " + orNone(s.Verified) + "  stable " + orNone(s.Stable))
		if s.InFlight != "" {
			t.line(prefix + fmt.Sprintf("in flight %s  step %d", clean(s.InFlight), s.Step+1))
		}
		if s.Failed != "" {
			t.line(prefix + "rolled back " + clean(s.Failed))
		}
		if s.PullRequest != nil {
			t.line(prefix + "pull request " + pullRequestOf(s.PullRequest))
		}
		if s.Revision != "" {
			t.line(prefix + "revision " + clean(s.Revision))
		}
		if s.Message != "" {
			t.line(prefix + clean(s.Message))
		}
	}
	return t.String()
}

// renderExperiment is the tree of one Experiment: its phase, commit
// stages, targets and workflow. applied is what the applier reports about
// its sync object (nil: not read).
func renderExperiment(e *scribev1.Experiment, applied *appliedRevision) string {
	var t treeWriter
	st := &e.Status
	t.field("Experiment", clean(e.Namespace+"/"+e.Name))
	t.field("Phase", orNone(string(st.Phase)))
	t.field("Ready", readyOf(st.Conditions))
	suspended(&t, e.Spec.Suspend)
	t.field("Stage", fmt.Sprintf("%d of %d%s", st.Stage, scribev1.StageWorkflow, stageName(st.Stage)))
	if st.PullRequest != nil {
		t.field("Pull request", pullRequestOf(st.PullRequest))
	}
	t.field("Revision", revisionOf(st.Revision))
	t.field("Applied", appliedOf(applied))
	if len(st.Stages) > 0 {
		t.line("Stages:")
		for i, s := range st.Stages {
			line := fmt.Sprintf("%d%s  commit %s", s.Stage, stageName(s.Stage), orNone(s.Commit))
			if s.CommittedAt != nil {
				line += "  at " + s.CommittedAt.UTC().Format("2006-01-02T15:04:05Z")
			}
			t.branch("", i, len(st.Stages), line)
		}
	}
	t.line("Targets:")
	if len(st.Targets) == 0 {
		t.line("└── (none yet)")
	}
	for i, tg := range st.Targets {
		head := clean(tg.Name) + "  " + orNone(string(tg.Phase))
		if tg.ClusterReady {
			head += "  cluster ready"
		} else {
			head += "  cluster not ready"
		}
		prefix := t.branch("", i, len(st.Targets), head)
		if tg.Message != "" {
			t.line(prefix + clean(tg.Message))
		}
		for j, c := range tg.Components {
			t.branch(prefix, j, len(tg.Components), componentOf(c))
		}
	}
	if len(st.Templates) > 0 {
		t.line("Templates:")
		for i, c := range st.Templates {
			t.branch("", i, len(st.Templates), componentOf(c))
		}
	}
	if wf := st.Workflow; wf != nil {
		t.field("Workflow", workflowOf(*wf))
	}
	if len(st.Runs) > 0 {
		t.line("Runs:")
		for i, r := range st.Runs {
			t.branch("", i, len(st.Runs), clean(r.Target+"/"+r.Component)+"  "+workflowOf(r))
		}
	}
	return t.String()
}

// stageName names an Experiment's commit stage, in parentheses.
func stageName(stage int32) string {
	switch stage {
	case scribev1.StageClusters:
		return " (clusters)"
	case scribev1.StageComponents:
		return " (components)"
	case scribev1.StageWorkflowTemplates:
		return " (workflow templates)"
	case scribev1.StageWorkflow:
		return " (workflow runs)"
	}
	return ""
}

func componentOf(c scribev1.ComponentStatus) string {
	s := clean(c.Name)
	if c.Ready {
		s += "  ready"
	} else {
		s += "  not ready"
	}
	if c.Delivery != "" {
		s += "  " + clean(c.Delivery)
	}
	if c.Message != "" {
		s += "  " + clean(c.Message)
	}
	return s
}

func workflowOf(w scribev1.WorkflowStatus) string {
	s := orNone(w.Kind + "/" + w.Name)
	s += "  " + orNone(w.Phase)
	if w.Message != "" {
		s += "  " + clean(w.Message)
	}
	return s
}
