package main

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"sigs.k8s.io/yaml"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/publish"
	"github.com/scribe-gitops/scribe/internal/publish/gitsink"
	"github.com/scribe-gitops/scribe/internal/termtext"
	"github.com/scribe-gitops/scribe/internal/yamlstream"
)

// Bounds of scribe history, which reads repositories it does not trust:
// a blob's declared size is checked before it is read, and it is read
// through a limit, so a small compressed object cannot inflate to
// gigabytes.
const (
	// defaultHistoryMaxCommits is --max-commits' default.
	defaultHistoryMaxCommits = 100_000
	// historyMaxCommitBytes: a larger commit is read this far, its
	// message cut.
	historyMaxCommitBytes = 1 << 20
	// historyMaxTreeBytes: a larger tree is not read.
	historyMaxTreeBytes = 8 << 20
	// historyMaxFileBytes: a larger rendered file is not read.
	historyMaxFileBytes = 4 << 20
	// historyMaxWarnings are printed; the rest are counted.
	historyMaxWarnings = 20
)

// errHistoryObjectTooLarge is wrapped when an object is over its bound.
var errHistoryObjectTooLarge = errors.New("larger than scribe history reads")

// walkedCommit is what history keeps of a commit: its graph, and the
// message of Scribe's own.
type walkedCommit struct {
	hash    plumbing.Hash
	parents []plumbing.Hash
	when    time.Time
	tree    plumbing.Hash
	// pr is the pull request the subject names, 0 for none.
	pr int
	// ours: the commit carries the Workload's trailer; message is then
	// its message.
	ours    bool
	message string
}

// historyWalk is one reading of a repository's history.
type historyWalk struct {
	st         storer.EncodedObjectStorer
	maxCommits int
	// ref is the trailer value of the Workload read.
	ref string
	// warnings about what was skipped, in the order found.
	warnings []string
	// files are the rendered files read, by blob: a blob is read and
	// parsed once however many commits hold it.
	files map[plumbing.Hash]renderedFile
	// loaded counts the commit objects read (each at most once).
	loaded int
}

func newHistoryWalk(st storer.EncodedObjectStorer, maxCommits int, src scribev1.ObjectIdentity) *historyWalk {
	return &historyWalk{st: st, maxCommits: maxCommits, ref: publish.ObjectRef(src), files: map[plumbing.Hash]renderedFile{}}
}

func (w *historyWalk) warn(format string, args ...any) {
	w.warnings = append(w.warnings, fmt.Sprintf(format, args...))
}

// commits reads the commits reachable from tip, each once, newest
// committer time first (as git log), at most maxCommits of them: a commit
// that cannot be read is skipped with a warning (its ancestors reachable
// only through it are not read). It stops when ctx is done.
func (w *historyWalk) commits(ctx context.Context, tip plumbing.Hash) ([]*walkedCommit, error) {
	seen := map[plumbing.Hash]bool{}
	var q commitQueue
	truncated := false
	push := func(h plumbing.Hash) {
		if seen[h] {
			return
		}
		seen[h] = true
		if w.loaded >= w.maxCommits {
			truncated = true
			return
		}
		w.loaded++
		c, err := w.readCommit(h)
		if err != nil {
			w.warn("commit %s: skipped, and the history only it leads to: %v", h, err)
			return
		}
		heap.Push(&q, c)
	}
	push(tip)
	var out []*walkedCommit
	for q.Len() > 0 {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("read the log: %w", context.Cause(ctx))
		}
		c := heap.Pop(&q).(*walkedCommit)
		out = append(out, c)
		for _, p := range c.parents {
			push(p)
		}
	}
	if truncated {
		w.warn("the history holds more than %d commits: only the newest %d were read (--max-commits), older rollouts are not shown", w.maxCommits, w.maxCommits)
	}
	return out, nil
}

// readCommit reads commit h, at most historyMaxCommitBytes of it.
func (w *historyWalk) readCommit(h plumbing.Hash) (*walkedCommit, error) {
	size, err := w.st.EncodedObjectSize(h)
	if err != nil {
		return nil, err
	}
	obj, err := w.st.EncodedObject(plumbing.CommitObject, h)
	if err != nil {
		return nil, err
	}
	if size > historyMaxCommitBytes {
		cut, err := readLimited(obj, historyMaxCommitBytes)
		if err != nil {
			return nil, err
		}
		mo := &plumbing.MemoryObject{}
		mo.SetType(plumbing.CommitObject)
		if _, err := mo.Write(cut); err != nil {
			return nil, err
		}
		obj = mo
		w.warn("commit %s: %d bytes, its message cut at %d", h, size, historyMaxCommitBytes)
	}
	var c object.Commit
	if err := c.Decode(obj); err != nil {
		return nil, err
	}
	wc := &walkedCommit{hash: h, parents: c.ParentHashes, when: c.Committer.When.UTC(), tree: c.TreeHash}
	subject, _, _ := strings.Cut(c.Message, "\n")
	if m := pullRequestRef.FindStringSubmatch(subject); m != nil {
		wc.pr, _ = strconv.Atoi(m[1])
	}
	for _, t := range gitsink.Trailers(c.Message) {
		if t[gitsink.TrailerObject] == w.ref {
			wc.ours, wc.message = true, c.Message
			break
		}
	}
	return wc, nil
}

// readLimited reads at most limit bytes of obj.
func readLimited(obj plumbing.EncodedObject, limit int64) ([]byte, error) {
	rd, err := obj.Reader()
	if err != nil {
		return nil, err
	}
	defer func() { _ = rd.Close() }()
	return io.ReadAll(io.LimitReader(rd, limit))
}

// pullRequests attributes commits to the pull requests that merged them:
// a merge whose subject names pull request n brought in its second
// parent and that parent's first-parent ancestors not already reachable
// from its first parent; a commit no merge brought in that names a pull
// request itself (a squash merge, "… (#12)") is that pull request's.
//
// One depth-first walk, first parents first, finds them, each commit
// entered once: when it reaches a merge's second parent, every ancestor
// of the merge's first parent has been entered, so what it newly enters
// along first parents from there is what the merge brought in.
func pullRequests(commits []*walkedCommit) map[plumbing.Hash]int {
	if len(commits) == 0 {
		return nil
	}
	byHash := make(map[plumbing.Hash]*walkedCommit, len(commits))
	for _, c := range commits {
		byHash[c.hash] = c
	}
	// label is the pull request whose merge brought a commit in (0: none).
	label := map[plumbing.Hash]int{commits[0].hash: 0}
	type frame struct {
		c    *walkedCommit
		next int
	}
	stack := []frame{{c: commits[0]}}
	for len(stack) > 0 {
		f := &stack[len(stack)-1]
		if f.next >= len(f.c.parents) {
			stack = stack[:len(stack)-1]
			continue
		}
		i := f.next
		f.next++
		p, ok := byHash[f.c.parents[i]]
		if !ok {
			continue // not read: skipped or beyond --max-commits
		}
		if _, entered := label[p.hash]; entered {
			continue
		}
		if i == 0 {
			label[p.hash] = label[f.c.hash]
		} else {
			label[p.hash] = f.c.pr // 0: a merge without a pull request claims them too
		}
		stack = append(stack, frame{c: p})
	}
	prs := map[plumbing.Hash]int{}
	for _, c := range commits {
		switch n := label[c.hash]; {
		case n != 0:
			prs[c.hash] = n
		case c.pr != 0 && len(c.parents) < 2:
			prs[c.hash] = c.pr
		}
	}
	return prs
}

// workloadCommits are the commits reachable from tip that carry src's
// trailer, oldest first, each with the traffic its tree routes. A commit
// whose tree or rendered files cannot be read is skipped with a warning.
func (w *historyWalk) workloadCommits(ctx context.Context, tip plumbing.Hash, src scribev1.ObjectIdentity, repoPath string) ([]historyCommit, error) {
	all, err := w.commits(ctx, tip)
	if err != nil {
		return nil, err
	}
	prs := pullRequests(all)
	dir := path.Join(strings.TrimPrefix(repoPath, "."), publish.OwnedDir(src))
	dir = strings.TrimPrefix(dir, "/")
	var out []historyCommit
	for i := len(all) - 1; i >= 0; i-- {
		c := all[i]
		if !c.ours {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("read the log: %w", context.Cause(ctx))
		}
		hc := historyCommit{SHA: c.hash.String(), Time: c.when, Message: commitBody(c.message), PullRequest: prs[c.hash]}
		sub, err := w.subtree(c.tree, dir)
		switch {
		case errors.Is(err, object.ErrDirectoryNotFound):
			hc.Deleted = true
		case err != nil:
			w.warn("commit %s: skipped: %s: %v", c.hash, dir, err)
			continue
		default:
			if hc.Traffic, err = w.renderedTraffic(ctx, sub, src.Name); err != nil {
				if ctx.Err() != nil {
					return nil, fmt.Errorf("read the log: %w", context.Cause(ctx))
				}
				w.warn("commit %s: skipped: %s: %v", c.hash, dir, err)
				continue
			}
		}
		out = append(out, hc)
	}
	return out, nil
}

// readTree reads tree h, refusing one over historyMaxTreeBytes.
func (w *historyWalk) readTree(h plumbing.Hash) (*object.Tree, error) {
	size, err := w.st.EncodedObjectSize(h)
	if err != nil {
		return nil, err
	}
	if size > historyMaxTreeBytes {
		return nil, fmt.Errorf("tree %s of %d bytes: %w (%d)", h, size, errHistoryObjectTooLarge, historyMaxTreeBytes)
	}
	return object.GetTree(w.st, h)
}

// subtree is the tree at dir (a slash path) below root;
// object.ErrDirectoryNotFound when there is none.
func (w *historyWalk) subtree(root plumbing.Hash, dir string) (*object.Tree, error) {
	t, err := w.readTree(root)
	if err != nil {
		return nil, err
	}
	if dir == "" {
		return t, nil
	}
	for _, name := range strings.Split(dir, "/") {
		var next *object.TreeEntry
		for i := range t.Entries {
			if t.Entries[i].Name == name {
				next = &t.Entries[i]
				break
			}
		}
		if next == nil || next.Mode.IsFile() {
			return nil, object.ErrDirectoryNotFound
		}
		if t, err = w.readTree(next.Hash); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// renderedFile is what history reads of a rendered file.
type renderedFile struct {
	name     string
	backends []backendRef // of the first rule
	err      error
}

type backendRef struct {
	Name   string `json:"name"`
	Weight *int32 `json:"weight"`
}

// readRendered reads and parses the blob h (named file), once per blob:
// its declared size is checked first, it is read through a limit, and
// its decoded YAML is bounded (aliases expanded) before it is decoded.
func (w *historyWalk) readRendered(h plumbing.Hash, file string) renderedFile {
	if f, ok := w.files[h]; ok {
		return f
	}
	f := parseRendered(w.st, h)
	if f.err != nil {
		f.err = fmt.Errorf("%s: %w", termtext.Line(file), f.err)
	}
	w.files[h] = f
	return f
}

func parseRendered(st storer.EncodedObjectStorer, h plumbing.Hash) renderedFile {
	size, err := st.EncodedObjectSize(h)
	if err != nil {
		return renderedFile{err: err}
	}
	if size > historyMaxFileBytes {
		return renderedFile{err: fmt.Errorf("%d bytes: %w (%d)", size, errHistoryObjectTooLarge, historyMaxFileBytes)}
	}
	obj, err := st.EncodedObject(plumbing.BlobObject, h)
	if err != nil {
		return renderedFile{err: err}
	}
	data, err := readLimited(obj, historyMaxFileBytes+1)
	if err != nil {
		return renderedFile{err: err}
	}
	if len(data) > historyMaxFileBytes {
		return renderedFile{err: fmt.Errorf("more than its declared size: %w (%d)", errHistoryObjectTooLarge, historyMaxFileBytes)}
	}
	if err := yamlstream.CheckDecodedSize(data, yamlstream.MaxDecodedSize); err != nil {
		return renderedFile{err: err}
	}
	var obj2 struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			Rules []struct {
				BackendRefs []backendRef `json:"backendRefs"`
			} `json:"rules"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &obj2); err != nil {
		return renderedFile{err: err}
	}
	f := renderedFile{name: obj2.Metadata.Name}
	if len(obj2.Spec.Rules) > 0 {
		f.backends = obj2.Spec.Rules[0].BackendRefs
	}
	return f
}

// renderedTraffic is the split a Workload's rendered directory routes: the
// weights of its HTTPRoutes' backends (Services NAME-VERSION), or, with
// no route, every version it deploys (Deployments NAME-VERSION) at an
// equal share.
func (w *historyWalk) renderedTraffic(ctx context.Context, dir *object.Tree, name string) ([]versionWeight, error) {
	var routed, deployed []versionWeight
	for _, e := range dir.Entries {
		if !e.Mode.IsFile() {
			continue
		}
		isRoute := strings.HasPrefix(e.Name, "httproute-")
		isDeployment := strings.HasPrefix(e.Name, "deployment-"+name+"-")
		if !isRoute && !isDeployment || isRoute && len(routed) > 0 {
			continue // the first rule of the first route tells the split
		}
		if err := ctx.Err(); err != nil {
			return nil, context.Cause(ctx)
		}
		f := w.readRendered(e.Hash, e.Name)
		if f.err != nil {
			return nil, f.err
		}
		if isDeployment {
			deployed = append(deployed, versionWeight{Version: strings.TrimPrefix(f.name, name+"-")})
			continue
		}
		for _, b := range f.backends {
			v, ok := strings.CutPrefix(b.Name, name+"-")
			if !ok {
				continue
			}
			wt := int32(1)
			if b.Weight != nil {
				wt = *b.Weight
			}
			routed = append(routed, versionWeight{Version: v, Weight: wt})
		}
	}
	if len(routed) > 0 {
		return routed, nil
	}
	for i := range deployed {
		deployed[i].Weight = int32(100 / len(deployed))
	}
	return deployed, nil
}

// commitQueue orders commits newest committer time first (ties by hash,
// so the order never depends on the map or heap).
type commitQueue []*walkedCommit

func (q commitQueue) Len() int { return len(q) }
func (q commitQueue) Less(i, j int) bool {
	if !q[i].when.Equal(q[j].when) {
		return q[i].when.After(q[j].when)
	}
	return q[i].hash.String() > q[j].hash.String()
}
func (q commitQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *commitQueue) Push(x any)   { *q = append(*q, x.(*walkedCommit)) }
func (q *commitQueue) Pop() any {
	old := *q
	c := old[len(old)-1]
	*q = old[:len(old)-1]
	return c
}
