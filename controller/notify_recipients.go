package controller

// Where a tenant's object may send: the annotations
// notifications.argoproj.io/subscribe.<trigger>.<service>: <recipients>
// are the tenant's, and the platform's bot posts wherever it can (any
// public Slack channel, any address its mail server takes). So the
// recipients an object's own annotations name are sent to only when the
// platform's ConfigMap allows them for the object's namespace, in
// RecipientsKey; the ConfigMap's own subscriptions are the platform's and
// are not bound by it.

import (
	"fmt"
	"strings"

	"github.com/argoproj/notifications-engine/pkg/services"
	"sigs.k8s.io/yaml"
)

// RecipientsKey is the key of NotificationsConfigMap that allows
// recipients to the objects of each namespace, as YAML: a namespace (or
// "*", every namespace) to a list of service:recipient (the service's name
// in service.<type>[.<name>], then what the annotation names: a Slack
// channel as it is written there, a Teams recipientUrls key; nothing after
// the service for a webhook) or service:* (any recipient of it). None
// allowed by default: an object's subscription annotations send nothing
// until the platform allows their recipients.
//
//	scribe.recipients: |
//	  team-a: ["slack:team-a-deploys", "teams:team-a", "deploy-log"]
//	  "*": ["slack:deploys"]
const RecipientsKey = "scribe.recipients"

// recipients are the service:recipient pairs each namespace ("*": every
// namespace) may subscribe its objects to.
type recipients map[string]map[string]bool

// parseRecipients reads RecipientsKey's value (empty: none allowed).
func parseRecipients(data string) (recipients, error) {
	var lists map[string][]string
	if err := yaml.UnmarshalStrict([]byte(data), &lists); err != nil {
		return nil, fmt.Errorf("want a namespace (or \"*\") to a list of service:recipient: %w", err)
	}
	r := recipients{}
	for ns, list := range lists {
		r[ns] = map[string]bool{}
		for _, e := range list {
			e = strings.TrimSpace(e)
			if e == "" || strings.HasPrefix(e, ":") {
				return nil, fmt.Errorf("namespace %s: %q names no service", ns, e)
			}
			service, recipient, _ := strings.Cut(e, ":")
			r[ns][service+":"+recipient] = true
		}
	}
	return r, nil
}

// allow says an object of namespace ns may send to d.
func (r recipients) allow(ns string, d services.Destination) bool {
	for _, key := range []string{ns, "*"} {
		if set := r[key]; set[d.Service+":"+d.Recipient] || set[d.Service+":*"] {
			return true
		}
	}
	return false
}

// recipientName is d as RecipientsKey would allow it.
func recipientName(d services.Destination) string {
	return d.Service + ":" + d.Recipient
}
