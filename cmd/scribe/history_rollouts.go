package main

import (
	"strings"
	"time"
)

// Outcomes of a rollout read back from Git.
const (
	outcomePromoted   = "promoted"
	outcomeRolledBack = "rolled back"
	outcomeSuperseded = "superseded"
	outcomeInProgress = "in progress"
	outcomeDeleted    = "deleted"
)

// historyCommit is one of Scribe's commits of a Workload, oldest first:
// what its tree routes to which version, and what its message says.
type historyCommit struct {
	SHA  string
	Time time.Time
	// Traffic is the split the commit's render routes, in spec order
	// (the newest version last); versions without traffic at weight 0.
	Traffic []versionWeight
	// Deleted: the commit removed the Workload's directory.
	Deleted bool
	// Message is the commit message's body (Scribe's reason), without
	// the trailers.
	Message string
	// PullRequest is the number of the pull request that merged the
	// commit, 0 when it was committed to the branch directly.
	PullRequest int
}

type versionWeight struct {
	Version string `json:"version"`
	Weight  int32  `json:"weight"`
}

// rolloutRecord is one rollout of a version, as history prints it.
type rolloutRecord struct {
	Version string    `json:"version"`
	Outcome string    `json:"outcome"`
	Start   time.Time `json:"start"`
	// End is zero while the rollout is in progress.
	End          time.Time `json:"end,omitzero"`
	Commits      []string  `json:"commits"`
	PullRequests []int     `json:"pullRequests,omitempty"`
	// Reason is the rollback's reason, from the commit message.
	Reason string `json:"reason,omitempty"`
}

// rollouts reads the rollouts out of a Workload's commits, oldest first: a
// rollout starts with the first commit routing traffic to a version other
// than the stable one (or adding a newer version at weight 0 while the
// stable one takes all traffic: a canary's warm-up), gathers each commit
// that moves it along, and ends when its
// version alone takes the traffic (promoted), when the stable version
// alone takes it back (rolled back, the reason from Scribe's "rollback of
// VERSION: why" message), when another version replaces it (superseded)
// or when the Workload is deleted. A version that takes all traffic in
// one commit (a first rollout, or a strategy without steps) is a rollout
// promoted in that commit.
func rollouts(commits []historyCommit) []rolloutRecord {
	var out []rolloutRecord
	var open *rolloutRecord
	stable := ""
	closeOpen := func(c historyCommit, outcome string) {
		open.Outcome, open.End = outcome, c.Time
		out = append(out, *open)
		open = nil
	}
	add := func(r *rolloutRecord, c historyCommit) {
		r.Commits = append(r.Commits, c.SHA)
		if c.PullRequest != 0 && (len(r.PullRequests) == 0 || r.PullRequests[len(r.PullRequests)-1] != c.PullRequest) {
			r.PullRequests = append(r.PullRequests, c.PullRequest)
		}
	}
	var prev []versionWeight
	for i, c := range commits {
		routed := prev
		prev = c.Traffic
		if c.Deleted {
			if open != nil {
				add(open, c)
				closeOpen(c, outcomeDeleted)
			}
			stable = ""
			continue
		}
		active := withTraffic(c.Traffic)
		if open != nil {
			if reason, ok := rollbackReason(c.Message, open.Version); ok && !routes(active, open.Version) {
				add(open, c)
				open.Reason = reason
				closeOpen(c, outcomeRolledBack)
				continue
			}
		}
		if len(active) == 1 {
			only := active[0].Version
			if open == nil && only == stable && i > 0 {
				if v := warmingUp(c.Traffic, routed, stable); v != "" {
					open = &rolloutRecord{Version: v, Start: c.Time}
					add(open, c)
					continue
				}
			}
			switch {
			case open != nil && only == open.Version:
				add(open, c)
				closeOpen(c, outcomePromoted)
			case open != nil && only == stable:
				// The stable version takes all traffic back without
				// Scribe's rollback message: the version left spec.versions.
				add(open, c)
				closeOpen(c, outcomeRolledBack)
			case open != nil:
				closeOpen(c, outcomeSuperseded)
				r := &rolloutRecord{Version: only, Start: c.Time}
				add(r, c)
				open = r
				closeOpen(c, outcomePromoted)
			case only != stable:
				r := &rolloutRecord{Version: only, Start: c.Time}
				add(r, c)
				open = r
				closeOpen(c, outcomePromoted)
			}
			stable = only
			continue
		}
		canary := canaryOf(active, stable)
		if canary == "" {
			continue
		}
		if stable == "" {
			stable = active[0].Version
		}
		if open != nil && open.Version != canary {
			closeOpen(c, outcomeSuperseded)
		}
		if open == nil {
			open = &rolloutRecord{Version: canary, Start: c.Time}
		}
		add(open, c)
	}
	if open != nil {
		open.Outcome = outcomeInProgress
		out = append(out, *open)
	}
	return out
}

// canaryOf is the version of traffic that is not stable: the last one
// when stable is unknown or not among them.
func canaryOf(traffic []versionWeight, stable string) string {
	canary := ""
	for _, t := range traffic {
		if t.Version != stable {
			canary = t.Version
		}
	}
	return canary
}

func routes(traffic []versionWeight, version string) bool {
	for _, t := range traffic {
		if t.Version == version {
			return true
		}
	}
	return false
}

// rollbackReason finds Scribe's "rollback of VERSION: why" in message.
func rollbackReason(message, version string) (string, bool) {
	prefix := "rollback of " + version + ": "
	for _, line := range strings.Split(message, "\n") {
		if r, ok := strings.CutPrefix(strings.TrimSpace(line), prefix); ok {
			return r, true
		}
	}
	return "", false
}

// withTraffic are the versions of traffic with a weight.
func withTraffic(traffic []versionWeight) []versionWeight {
	var out []versionWeight
	for _, t := range traffic {
		if t.Weight > 0 {
			out = append(out, t)
		}
	}
	return out
}

// warmingUp is the version a canary's warm-up commit adds: the newest
// (last) version of traffic, at weight 0, newer than stable (after it)
// and not routed by the previous commit.
func warmingUp(traffic, previous []versionWeight, stable string) string {
	if len(traffic) < 2 {
		return ""
	}
	last := traffic[len(traffic)-1]
	if last.Weight != 0 || last.Version == stable || routes(previous, last.Version) {
		return ""
	}
	for _, t := range traffic[:len(traffic)-1] {
		if t.Version == stable {
			return last.Version
		}
	}
	return ""
}
