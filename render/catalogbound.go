package render

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"testing/fstest"
	"time"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	cueerrors "cuelang.org/go/cue/errors"
)

// Bounds of a user catalog check.
const (
	// DefaultCatalogCPU is the CPU time one check may use: user and
	// system time of the checker process, all its threads (the garbage
	// collector's included). CPU time, not wall-clock time: a busy
	// machine stretches a check's wall-clock time but not the work it
	// does, so an honest catalog that passes on an idle machine passes
	// on a busy one, and a runaway one stops after the same work.
	DefaultCatalogCPU = 20 * time.Second
	// catalogWallFactor sets the wall-clock backstop of a check: this
	// many times its CPU bound. CPU time bounds what the check does;
	// the backstop is there only for a checker that makes no progress at
	// all (stopped, or starved by a CPU quota), which spends no CPU and
	// would otherwise hold its caller forever, and for platforms where
	// the checker cannot read its own CPU time (all but Linux).
	catalogWallFactor = 10
	// DefaultCatalogMemory is the memory one check may use (Go heap and
	// runtime); its address space may be 2 GiB more (RLIMIT_AS).
	DefaultCatalogMemory = 1 << 30
	// CatalogCheckCommand is the subcommand of the scribe binary that
	// serves ServeCatalogCheck (hidden: `scribe catalog-check`).
	CatalogCheckCommand = "catalog-check"

	// catalogMaxBytes bounds the CUE files one check reads.
	catalogMaxBytes = 64 << 20
	// addressSpaceHeadroom is the address space the checker may map beyond
	// its memory bound: the binary, thread stacks, the runtime's arenas.
	addressSpaceHeadroom = 2 << 30
	// catalogCPUSlack is how far past its CPU bound the kernel kills a
	// checker whose watchdog did not stop it (RLIMIT_CPU).
	catalogCPUSlack = 2 * time.Second
	// envCatalogMemory passes the memory bound to the checker.
	envCatalogMemory = "SCRIBE_CATALOG_CHECK_MEMORY"
	// envCatalogCPU passes the CPU bound (nanoseconds) to the checker.
	envCatalogCPU = "SCRIBE_CATALOG_CHECK_CPU"
	// envCatalogChild marks a process CatalogBound started as its checker:
	// see init.
	envCatalogChild = "SCRIBE_CATALOG_CHECK_CHILD"
	// Exit codes of the checker besides 0 (the catalogs load).
	exitCatalogInvalid = 3
	exitCatalogMemory  = 4
	exitCatalogCPU     = 5
)

// CatalogBound evaluates user catalogs first in a child process bounded in
// CPU time and memory, and loads them into an engine only when that succeeded:
// CUE has no cancellation and no memory cap, and a catalog of a few lines
// (`list.Range(0, 5e7, 1)`) can take gigabytes. The child runs Command, a
// program that links this package: CatalogBound marks the child in its
// environment, and this package's init serves ServeCatalogCheck before the
// program's main runs (see init). DefaultCatalogBound names the running
// executable, so any program using this package gets the bound without
// code of its own; the scribe binary also has a hidden `catalog-check`
// subcommand that serves the same check from stdin.
type CatalogBound struct {
	// Command starts the checker: argv, Command[0] a path.
	Command []string
	// Timeout is the CPU time one check may use (see DefaultCatalogCPU);
	// 0 means DefaultCatalogCPU. The checker stops itself past it; its
	// wall-clock time is bounded only by a backstop of catalogWallFactor
	// times Timeout (and by the caller's context).
	Timeout time.Duration
	// Memory the checker may use, in bytes; 0 means DefaultCatalogMemory.
	// The checker caps its heap at it (GOMEMLIMIT and a watchdog) and its
	// address space at Memory + 2 GiB (RLIMIT_AS, on Linux: a Go process
	// maps over 1 GiB of address space before its first allocation).
	Memory int64
}

// DefaultCatalogBound runs the checker as this executable's `catalog-check`
// subcommand, with the default limits.
func DefaultCatalogBound() (CatalogBound, error) {
	exe, err := os.Executable()
	if err != nil {
		return CatalogBound{}, fmt.Errorf("catalog checker: find this executable: %w", err)
	}
	return CatalogBound{Command: []string{exe, CatalogCheckCommand}}, nil
}

// Catalog is one user catalog: see WithCatalog.
type Catalog struct {
	// Name says where the catalog comes from; errors name its files under it.
	Name string
	// FS holds the catalog's *.cue files.
	FS fs.FS
}

// CatalogFailure is why a user catalog failed its bounded check.
type CatalogFailure string

// Reasons a user catalog fails its check.
const (
	// CatalogTimeout: evaluating the catalog took more CPU time than the
	// bound (or, where the checker cannot read its CPU time or makes no
	// progress, more than the wall-clock backstop).
	CatalogTimeout CatalogFailure = "timeout"
	// CatalogMemoryLimit: evaluating the catalog took more memory than the
	// bound.
	CatalogMemoryLimit CatalogFailure = "memory limit"
	// CatalogCUEError: the catalog is not valid CUE, or not a valid catalog.
	CatalogCUEError CatalogFailure = "CUE error"
	// CatalogCheckerFailed: the checker itself could not run or crashed.
	CatalogCheckerFailed CatalogFailure = "checker failed"
)

// CatalogError is a user catalog that failed its bounded check: the
// catalog, not the caller, is at fault (but for CatalogCheckerFailed).
type CatalogError struct {
	Reason CatalogFailure
	// Catalogs are the names of the catalogs checked together.
	Catalogs []string
	// Detail is the checker's message: the CUE error, or what was exceeded.
	Detail string
}

func (e *CatalogError) Error() string {
	if e.Reason == CatalogCUEError {
		return e.Detail
	}
	return fmt.Sprintf("catalog %s: %s: %s", strings.Join(e.Catalogs, ", "), e.Reason, e.Detail)
}

// New reads the catalogs' CUE files once, evaluates them in the bounded
// checker, and only then loads them (the same bytes) into a new engine with
// opts. A catalog that fails the check is a *CatalogError.
func (b CatalogBound) New(ctx context.Context, catalogs []Catalog, opts ...Option) (*Engine, error) {
	if len(catalogs) == 0 {
		return New(opts...)
	}
	req, err := readCatalogs(catalogs)
	if err != nil {
		return nil, err
	}
	if err := b.check(ctx, req); err != nil {
		return nil, err
	}
	for _, c := range req.Catalogs {
		opts = append(opts, WithCatalog(c.Name, c.mapFS()))
	}
	return New(opts...)
}

// catalogRequest is what the checker reads on stdin.
type catalogRequest struct {
	Catalogs []catalogFiles `json:"catalogs"`
}

type catalogFiles struct {
	Name  string            `json:"name"`
	Files map[string][]byte `json:"files"` // *.cue files by slash path
}

func (c catalogFiles) mapFS() fstest.MapFS {
	m := fstest.MapFS{}
	for p, data := range c.Files {
		m[p] = &fstest.MapFile{Data: data, Mode: 0o444}
	}
	return m
}

// readCatalogs reads every *.cue file of the catalogs, at most
// catalogMaxBytes in all.
func readCatalogs(catalogs []Catalog) (*catalogRequest, error) {
	req := &catalogRequest{}
	var total int64
	for _, c := range catalogs {
		cf := catalogFiles{Name: c.Name, Files: map[string][]byte{}}
		err := fs.WalkDir(c.FS, ".", func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() || !strings.HasSuffix(p, ".cue") {
				return nil
			}
			if !d.Type().IsRegular() {
				return fmt.Errorf("%s is not a regular file", p)
			}
			f, err := c.FS.Open(p)
			if err != nil {
				return err
			}
			defer func() { _ = f.Close() }()
			data, err := io.ReadAll(io.LimitReader(f, catalogMaxBytes-total+1))
			if err != nil {
				return fmt.Errorf("read %s: %w", p, err)
			}
			total += int64(len(data))
			if total > catalogMaxBytes {
				return fmt.Errorf("the catalogs' CUE files exceed %d MiB", catalogMaxBytes>>20)
			}
			cf.Files[p] = data
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("catalog %s: %w", c.Name, err)
		}
		req.Catalogs = append(req.Catalogs, cf)
	}
	return req, nil
}

// check runs the checker on req.
func (b CatalogBound) check(ctx context.Context, req *catalogRequest) error {
	names := make([]string, len(req.Catalogs))
	for i, c := range req.Catalogs {
		names[i] = c.Name
	}
	fail := func(reason CatalogFailure, format string, args ...any) error {
		return &CatalogError{Reason: reason, Catalogs: names, Detail: fmt.Sprintf(format, args...)}
	}
	if len(b.Command) == 0 {
		return fail(CatalogCheckerFailed, "no checker command")
	}
	cpu, mem := b.Timeout, b.Memory
	if cpu <= 0 {
		cpu = DefaultCatalogCPU
	}
	wall := catalogWallFactor * cpu
	if mem <= 0 {
		mem = DefaultCatalogMemory
	}
	in, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("encode catalog check: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, wall)
	defer cancel()
	cmd := exec.CommandContext(cctx, b.Command[0], b.Command[1:]...)
	cmd.Stdin = bytes.NewReader(in)
	stderr := &headBuffer{max: 64 << 10}
	cmd.Stderr = stderr
	cmd.Env = append(os.Environ(),
		envCatalogChild+"=1",
		envCatalogMemory+"="+strconv.FormatInt(mem, 10),
		envCatalogCPU+"="+strconv.FormatInt(int64(cpu), 10),
		"GOMEMLIMIT="+strconv.FormatInt(mem, 10))
	cmd.WaitDelay = 2 * time.Second
	setCheckerAttr(cmd)
	start := time.Now()
	err = cmd.Run()
	msg := strings.TrimSpace(stderr.String())
	var exit *exec.ExitError
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("catalog check: %w", ctx.Err())
	case cctx.Err() != nil:
		return fail(CatalogTimeout, "CUE evaluation did not finish within %s of wall-clock time (the backstop of its %s CPU bound; it used %s of CPU)", wall, cpu, usedCPU(cmd).Round(100*time.Millisecond))
	case errors.As(err, &exit) && (exit.ExitCode() == exitCatalogCPU || usedCPU(cmd) > cpu):
		// The checker stops itself past its bound (or the kernel's
		// RLIMIT_CPU kills it, just after).
		return fail(CatalogTimeout, "CUE evaluation used more than %s of CPU time", cpu)
	case errors.As(err, &exit) && exit.ExitCode() == exitCatalogInvalid:
		return fail(CatalogCUEError, "%s", msg)
	case errors.As(err, &exit) && (exit.ExitCode() == exitCatalogMemory || outOfMemory(msg)):
		return fail(CatalogMemoryLimit, "CUE evaluation exceeded %d MiB after %s", mem>>20, time.Since(start).Round(100*time.Millisecond))
	default:
		if i := strings.IndexByte(msg, '\n'); i >= 0 {
			msg = msg[:i] // a runtime crash's first line, not its goroutine dump
		}
		return fail(CatalogCheckerFailed, "%s: %v: %s", strings.Join(b.Command, " "), err, msg)
	}
}

// usedCPU is the CPU time the finished checker used, all its threads.
func usedCPU(cmd *exec.Cmd) time.Duration {
	if cmd.ProcessState == nil {
		return 0
	}
	return cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
}

// outOfMemory reports whether a crashed checker's stderr says it ran out
// of memory (the Go runtime's message once RLIMIT_AS refuses a mapping).
func outOfMemory(stderr string) bool {
	return strings.Contains(stderr, "out of memory") || strings.Contains(stderr, "cannot allocate memory")
}

// headBuffer keeps the first max bytes written to it.
type headBuffer struct {
	bytes.Buffer
	max int
}

func (h *headBuffer) Write(p []byte) (int, error) {
	if room := h.max - h.Len(); room > 0 {
		h.Buffer.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// init makes every program that links this package the catalog checker
// when CatalogBound started it as one: before main (or a test binary's
// TestMain) runs, it serves ServeCatalogCheck and exits. So the checker
// never runs the program's own work, whatever the program is: the scribe
// CLI, the controller, a test binary embedding the controller, or another
// program using this package with DefaultCatalogBound.
func init() {
	if os.Getenv(envCatalogChild) != "1" {
		return
	}
	os.Exit(ServeCatalogCheck(os.Stdin, os.Stderr))
}

// ServeCatalogCheck is the checker's side of CatalogBound: it bounds this
// process's memory and CPU time (from the bounds its parent passes in the
// environment),
// reads the catalogs from stdin, evaluates all of their CUE (hidden fields
// and definitions included) as the engine would load it, and returns the
// process's exit code: 0 when they load, 3 with the error on stderr when
// they do not. It is a process's whole work: past its memory bound it
// exits the process itself with code 4, past its CPU bound with code 5.
func ServeCatalogCheck(stdin io.Reader, stderr io.Writer) int {
	mem := int64(DefaultCatalogMemory)
	if v, err := strconv.ParseInt(os.Getenv(envCatalogMemory), 10, 64); err == nil && v > 0 {
		mem = v
	}
	cpu := DefaultCatalogCPU
	if v, err := strconv.ParseInt(os.Getenv(envCatalogCPU), 10, 64); err == nil && v > 0 {
		cpu = time.Duration(v)
	}
	stop := boundProcess(mem, cpu, stderr)
	defer stop()

	var req catalogRequest
	data, err := io.ReadAll(io.LimitReader(stdin, 2*catalogMaxBytes))
	if err == nil {
		err = json.Unmarshal(data, &req)
	}
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "catalog check: read the request: %v\n", err)
		return 2
	}
	if err := checkCatalogs(req.Catalogs); err != nil {
		_, _ = fmt.Fprintln(stderr, err)
		return exitCatalogInvalid
	}
	return 0
}

// checkCatalogs loads the catalogs as New does, then evaluates every value
// of their packages: whatever the engine may evaluate later, in process,
// has been evaluated here within the bound.
func checkCatalogs(catalogs []catalogFiles) error {
	names := make([]string, len(catalogs))
	fss := make([]fs.FS, len(catalogs))
	for i, c := range catalogs {
		names[i], fss[i] = c.Name, c.mapFS()
	}
	module, err := newCUEModule(moduleRoot, fss, nil)
	if err != nil {
		return userCatalogError(err, names)
	}
	lc, err := loadCatalogs(cuecontext.New(), module, names)
	if err != nil {
		return userCatalogError(err, names)
	}
	for i, v := range lc.packages {
		if err := v.Validate(cue.All(), cue.Hidden(true), cue.Definitions(true)); err != nil {
			return userCatalogError(fmt.Errorf("catalog %d: %s", i, cueerrors.Details(err, nil)), names)
		}
		// The engine reads each entry through #Entry (its defaults).
		it, err := v.LookupPath(cue.ParsePath("entries")).Fields()
		if err != nil {
			continue
		}
		for it.Next() {
			_, _ = lc.entrySchema.Unify(it.Value()).MarshalJSON()
		}
	}
	return nil
}

// boundProcess caps this process at mem bytes: the Go runtime's soft
// limit, a watchdog that exits the process once the runtime holds more
// than mem (CUE allocates in tight loops the garbage collector cannot keep
// up with), and, where the platform has one, a hard cap on the address
// space. It caps its CPU time at cpu the same way: the watchdog exits the
// process once it used more (where the platform tells a process its CPU
// time), and the kernel's RLIMIT_CPU kills it a little later should the
// watchdog not run. stop ends the watchdog.
func boundProcess(mem int64, cpu time.Duration, stderr io.Writer) (stop func()) {
	debug.SetMemoryLimit(mem)
	limitAddressSpace(uint64(mem) + addressSpaceHeadroom)
	limitCPU(cpu + catalogCPUSlack)
	done := make(chan struct{})
	go func() {
		samples := []metrics.Sample{
			{Name: "/memory/classes/total:bytes"},
			{Name: "/memory/classes/heap/released:bytes"},
		}
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			metrics.Read(samples)
			used := int64(samples[0].Value.Uint64() - samples[1].Value.Uint64())
			if used > mem {
				_, _ = fmt.Fprintf(stderr, "catalog check: memory limit of %d MiB exceeded (%d MiB in use)\n", mem>>20, used>>20)
				os.Exit(exitCatalogMemory)
			}
			if spent, ok := processCPU(); ok && spent > cpu {
				_, _ = fmt.Fprintf(stderr, "catalog check: CPU time limit of %s exceeded (%s used)\n", cpu, spent.Round(time.Millisecond))
				os.Exit(exitCatalogCPU)
			}
		}
	}()
	return func() { close(done) }
}
