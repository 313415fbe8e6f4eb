package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// What the real node changes on the host, read before and checked after
// (TestMain): machines are reused by later runs, so a test run must leave
// the host as it found it.

// hostState is what the real node can change on the host.
type hostState struct {
	Procs    []string          // processes of the node's kinds, by name
	Mounts   []string          // mount points
	Links    []string          // network interfaces
	Chains   []string          // iptables chains and rules, per table
	Cgroups  []string          // cgroup folders named kubepods
	Sysctls  map[string]string // the values the node's parts set
	Paths    []string          // hard-coded host paths that exist
	Netns    []string          // named network namespaces
	Hostname string
}

// nodeProcNames are the process names of the real node's parts.
var nodeProcNames = map[string]bool{
	"containerd": true, "containerd-shim": true, "containerd-shim-runc-v2": true, "runc": true,
	"kubelet": true, "kube-proxy": true, "pause": true,
	// The loop's workflow engine on the host and its executor in pods
	// (comm holds 15 characters: workflow-controller's is cut).
	"workflow-contro": true, "argoexec": true,
}

// nodeSysctls are the sysctls the kubelet (vm.overcommit_memory,
// kernel.panic*, kernel.keys.*), kube-proxy (conntrack, route_localnet)
// and the bridge plugin (ip_forward) may set.
var nodeSysctls = []string{
	"vm.overcommit_memory", "vm.panic_on_oom", "kernel.panic", "kernel.panic_on_oops",
	"kernel.keys.root_maxkeys", "kernel.keys.root_maxbytes",
	"net.ipv4.ip_forward", "net.ipv4.conf.all.route_localnet",
	"net.bridge.bridge-nf-call-iptables", "net.netfilter.nf_conntrack_max",
	"net.netfilter.nf_conntrack_tcp_timeout_established", "net.netfilter.nf_conntrack_tcp_timeout_close_wait",
}

// nodeHostPaths are the host paths a node's parts hard-code.
var nodeHostPaths = []string{"/var/lib/kubelet", "/run/containerd", "/var/lib/cni", "/opt/containerd", "/etc/cni", "/var/run/netns", "/var/log/pods", "/var/log/containers"}

func readHostState() hostState {
	h := hostState{Sysctls: map[string]string{}}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		comm, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err != nil {
			continue
		}
		if c := strings.TrimSpace(string(comm)); nodeProcNames[c] {
			h.Procs = append(h.Procs, c)
		}
	}
	h.Mounts = mountPoints()
	links, _ := os.ReadDir("/sys/class/net")
	for _, l := range links {
		h.Links = append(h.Links, l.Name())
	}
	h.Chains = iptablesLines()
	h.Cgroups = append(kubepodsCgroups("kubepods"), kubepodsCgroups(appCgroupRoot)...)
	for _, k := range nodeSysctls {
		if b, err := os.ReadFile(sysctlPath(k)); err == nil {
			h.Sysctls[k] = strings.TrimSpace(string(b))
		}
	}
	for _, p := range nodeHostPaths {
		if _, err := os.Lstat(p); err == nil {
			h.Paths = append(h.Paths, p)
		}
	}
	if ns, err := os.ReadDir("/var/run/netns"); err == nil {
		for _, e := range ns {
			h.Netns = append(h.Netns, e.Name())
		}
	}
	h.Hostname, _ = os.Hostname()
	for _, s := range [][]string{h.Procs, h.Mounts, h.Links, h.Chains, h.Cgroups, h.Paths, h.Netns} {
		sort.Strings(s)
	}
	return h
}

// diffHostState lists what after has that before had not, and what
// changed: the leftovers of a run.
func diffHostState(before, after hostState) []string {
	var out []string
	added := func(what string, b, a []string) {
		seen := map[string]int{}
		for _, x := range b {
			seen[x]++
		}
		for _, x := range a {
			if seen[x] > 0 {
				seen[x]--
				continue
			}
			out = append(out, what+" "+x)
		}
	}
	added("process", before.Procs, after.Procs)
	added("mount", before.Mounts, after.Mounts)
	added("network interface", before.Links, after.Links)
	added("iptables", before.Chains, after.Chains)
	added("cgroup", before.Cgroups, after.Cgroups)
	added("path", before.Paths, after.Paths)
	added("network namespace", before.Netns, after.Netns)
	for _, k := range nodeSysctls {
		if before.Sysctls[k] != after.Sysctls[k] {
			out = append(out, fmt.Sprintf("sysctl %s = %q, was %q", k, after.Sysctls[k], before.Sysctls[k]))
		}
	}
	if before.Hostname != after.Hostname {
		out = append(out, fmt.Sprintf("hostname %q, was %q", after.Hostname, before.Hostname))
	}
	return out
}

// restoreSysctls writes back the sysctls that differ from before.
func restoreSysctls(before hostState) error {
	var errs []error
	for _, k := range nodeSysctls {
		was, ok := before.Sysctls[k]
		if !ok {
			continue
		}
		b, err := os.ReadFile(sysctlPath(k))
		if err != nil || strings.TrimSpace(string(b)) == was {
			continue
		}
		if err := os.WriteFile(sysctlPath(k), []byte(was), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restore sysctl %s=%s: %w", k, was, err))
		}
	}
	return errors.Join(errs...)
}

func sysctlPath(k string) string {
	return filepath.Join("/proc/sys", strings.ReplaceAll(k, ".", "/"))
}

func mountPoints() []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer func() { _ = f.Close() }()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 4 {
			out = append(out, unescapeMount(f[4]))
		}
	}
	return out
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unmountUnder lazily unmounts every mount point under dir, deepest first.
func unmountUnder(dir string) error {
	var errs []error
	for range 3 { // a mount may hide another at the same point
		var under []string
		for _, m := range mountPoints() {
			if m == dir || strings.HasPrefix(m, dir+"/") {
				under = append(under, m)
			}
		}
		if len(under) == 0 {
			return nil
		}
		sort.Slice(under, func(i, j int) bool { return len(under[i]) > len(under[j]) })
		errs = errs[:0]
		for _, m := range under {
			if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("unmount %s: %w", m, err))
			}
		}
	}
	return errors.Join(errs...)
}

// killProcsMentioning SIGKILLs every process whose command line names s
// (the node's folder: containerd's shims, the kubelet, leftover pauses
// are found through their -address or --root-dir flags), and the
// processes in those processes' cgroups under kubepods.
func killProcsMentioning(s string) {
	killCmdlinesNaming(s)
	// Containers' processes do not name the folder: they live in the
	// pods' cgroups.
	killProcsInCgroups("kubepods")
}

// killCmdlinesNaming SIGKILLs every process whose command line names s.
func killCmdlinesNaming(s string) {
	ents, _ := os.ReadDir("/proc")
	self := strconv.Itoa(os.Getpid())
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil || e.Name() == self {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(cmdline), s) {
			continue
		}
		pid, _ := strconv.Atoi(e.Name())
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// kubepodsCgroups lists the cgroup folders named root (and below) in every
// hierarchy, deepest first.
func kubepodsCgroups(root string) []string {
	hier, _ := filepath.Glob("/sys/fs/cgroup/*")
	var out []string
	for _, h := range hier {
		top := filepath.Join(h, root)
		if _, err := os.Stat(top); err != nil {
			continue
		}
		_ = filepath.WalkDir(top, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				out = append(out, p)
			}
			return nil
		})
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// removeCgroups removes the cgroup folders named root, deepest first
// (a cgroup folder is removed with rmdir once it holds no process).
func removeCgroups(root string) {
	for range 20 {
		left := kubepodsCgroups(root)
		if len(left) == 0 {
			return
		}
		for _, cg := range left {
			_ = syscall.Rmdir(cg)
		}
		if len(kubepodsCgroups(root)) == 0 {
			return
		}
		killProcsInCgroups(root)
		time.Sleep(100 * time.Millisecond)
	}
}

func killProcsInCgroups(root string) {
	for _, cg := range kubepodsCgroups(root) {
		b, _ := os.ReadFile(filepath.Join(cg, "cgroup.procs"))
		for _, l := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(l); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}

// kubeChain matches the chains kube-proxy and the kubelet make.
var kubeChain = regexp.MustCompile(`^(KUBE-|CNI-)`)

// removeKubeChains deletes the rules that jump to KUBE-* and CNI-* chains
// and then those chains, in every table.
func removeKubeChains() {
	for _, table := range []string{"filter", "nat", "mangle"} {
		out, err := exec.Command("iptables-save", "-t", table).Output()
		if err != nil {
			continue
		}
		var rules, chains []string
		for _, l := range strings.Split(string(out), "\n") {
			switch {
			case strings.HasPrefix(l, ":"):
				if name := strings.Fields(l[1:])[0]; kubeChain.MatchString(name) {
					chains = append(chains, name)
				}
			case strings.HasPrefix(l, "-A "):
				f := strings.Fields(l)
				if len(f) > 1 && !kubeChain.MatchString(f[1]) && (strings.Contains(l, " KUBE-") || strings.Contains(l, " CNI-")) {
					rules = append(rules, l)
				}
			}
		}
		for _, r := range rules {
			args := append([]string{"-t", table, "-D"}, strings.Fields(strings.TrimPrefix(r, "-A "))...)
			_ = exec.Command("iptables", args...).Run()
		}
		for _, c := range chains {
			_ = exec.Command("iptables", "-t", table, "-F", c).Run()
		}
		for _, c := range chains {
			_ = exec.Command("iptables", "-t", table, "-X", c).Run()
		}
	}
}

// iptablesLines are the chains and rules of the tables the node changes,
// without counters.
func iptablesLines() []string {
	var out []string
	for _, table := range []string{"filter", "nat", "mangle"} {
		b, err := exec.Command("iptables-save", "-t", table).Output()
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			switch {
			case strings.HasPrefix(l, ":"):
				out = append(out, table+" chain "+strings.Fields(l[1:])[0])
			case strings.HasPrefix(l, "-A "):
				out = append(out, table+" "+l)
			}
		}
	}
	return out
}
