package controller

import (
	"strings"
	"unicode"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// triggerFor names the notifications-engine trigger an Event fires, as
// Argo Rollouts derives its triggers from its Events' reasons: "on-" and
// the reason in kebab case (RolledBack: on-rolled-back), with the kind
// after "on-" for the kinds other than Workload (an Experiment's phase
// Running: on-experiment-running; a Pipeline's Verified:
// on-pipeline-verified), so that one reason of two kinds (Promoted) names
// two triggers.
func triggerFor(kind, reason string) string {
	if reason == "" {
		return ""
	}
	prefix := "on-"
	if kind != "" && kind != scribev1.WorkloadKind {
		prefix += kebab(kind) + "-"
	}
	return prefix + kebab(reason)
}

// kebab writes an UpperCamelCase reason in kebab case: a capital that
// starts a word (after a lower-case letter or digit, or before a
// lower-case letter after a capital) is preceded by a hyphen
// (CanaryAvailable: canary-available, HTTPCheckFailed: http-check-failed).
func kebab(s string) string {
	r := []rune(s)
	var b strings.Builder
	for i, c := range r {
		if unicode.IsUpper(c) && i > 0 {
			prev := r[i-1]
			nextLower := i+1 < len(r) && unicode.IsLower(r[i+1])
			if unicode.IsLower(prev) || unicode.IsDigit(prev) || (unicode.IsUpper(prev) && nextLower) {
				b.WriteByte('-')
			}
		}
		b.WriteRune(unicode.ToLower(c))
	}
	return b.String()
}

// defaultTrigger is a trigger, and its template, that Scribe provides
// when the ConfigMap does not define one of that name.
type defaultTrigger struct {
	kind, reason string
	// about is the template's title.
	about string
}

// defaultTriggers are the triggers a user can subscribe to without
// writing one: what a person operating a rollout wants to be told. A
// ConfigMap key trigger.<name> or template.<name> replaces Scribe's.
var defaultTriggers = []defaultTrigger{
	{scribev1.WorkloadKind, "RolloutStarted", "rollout started"},
	{scribev1.WorkloadKind, "StepAdvanced", "step promoted"},
	{scribev1.WorkloadKind, "CheckFailed", "analysis failed"},
	{scribev1.WorkloadKind, "RolledBack", "rolled back"},
	{scribev1.WorkloadKind, "AwaitingPromotion", "awaiting promotion"},
	{scribev1.WorkloadKind, "PullRequestOpened", "awaiting review"},
	{scribev1.WorkloadKind, "Aborted", "aborted"},
	{scribev1.WorkloadKind, "PromoteRequested", "promotion requested"},
	{scribev1.WorkloadKind, "RetryRequested", "retry requested"},
	{scribev1.WorkloadKind, "Promoted", "rollout completed"},
	{scribev1.ExperimentKind, string(scribev1.ExperimentProvisioning), "experiment provisioning"},
	{scribev1.ExperimentKind, string(scribev1.ExperimentReady), "experiment ready"},
	{scribev1.ExperimentKind, string(scribev1.ExperimentRunning), "experiment running"},
	{scribev1.ExperimentKind, string(scribev1.ExperimentComplete), "experiment complete"},
	{scribev1.ExperimentKind, string(scribev1.ExperimentFailed), "experiment failed"},
	{scribev1.PipelineKind, "Verified", "stage verified"},
	{scribev1.PipelineKind, "Promoted", "admitted to a stage"},
	{scribev1.PipelineKind, ReasonStageRolledBack, "stage rolled back"},
}

// defaultNotificationsConfig are the ConfigMap entries of the default
// triggers: each fires on its Event (when: "true") and sends the
// template of its name, which reads the Event (.event) and the object
// (.obj, and by its kind: .workload, .experiment, .pipeline).
func defaultNotificationsConfig() map[string]string {
	data := map[string]string{}
	for _, t := range defaultTriggers {
		name := strings.TrimPrefix(triggerFor(t.kind, t.reason), "on-")
		data["trigger.on-"+name] = "- when: \"true\"\n  send: [" + name + "]\n"
		data["template."+name] = defaultTemplate(t.about)
	}
	return data
}

// defaultTemplate says what happened to which object, with a Slack
// colour and a Teams title.
func defaultTemplate(about string) string {
	return `message: '{{.obj.kind}} {{.obj.metadata.namespace}}/{{.obj.metadata.name}} ` + about + `: {{.event.message}}'
slack:
  attachments: |
    [{"color": "{{if eq .event.type "Warning"}}#E96D76{{else}}#18be52{{end}}", "fields": [{"title": "Reason", "value": "{{.event.reason}}", "short": true}, {"title": "Revision", "value": "{{.event.revision}}", "short": true}]}]
teams:
  title: '{{.obj.kind}} {{.obj.metadata.namespace}}/{{.obj.metadata.name}} ` + about + `'
  themeColor: '{{if eq .event.type "Warning"}}#E96D76{{else}}#18be52{{end}}'
`
}
