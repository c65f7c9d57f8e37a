// Command gotest runs the test binaries of several Go packages inside ONE
// VM (ci/vm/run) and writes `go test -json` events for all of them on
// stdout, for ci/testsummary. `go test -exec ci/vm/run` boots a VM per
// package (~5-9 s each under TCG); this boots one for the whole list.
//
//	go run ./ci/vm/gotest [-exec ci/vm/run] [-timeout 40m] [-list ci/vm/ipip-tests] \
//		[-- ./pkg [test binary args...]]...
//
// -list names a file of `./pkg TestName[/sub]` lines (ci/vm/ipip-tests): one
// entry per package, with a -test.run pattern built from its lines. Each
// `-- [NAME=value...] ./pkg args...` group adds one more entry with those
// arguments passed to the test binary as they are (e.g.
// -ginkgo.label-filter=ipip) and those variables in its environment (e.g.
// BIRDCAGE_LAB=handmade), so one package can run several times, in order.
//
// The test binaries and cmd/test2json are built on the host (go test -c);
// in the guest each runs in its package directory under test2json -t -p, one
// after the other, as go test would run them. What go test itself would say
// for a package that cannot run is said here too: a build failure is a
// package-level "fail" event with the build output, and when the VM ends
// before a package's final event (guest crash, VM timeout) the tests it was
// running get a "fail" event naming the reason, as does every package that
// never started. ci/vm/run's own message and the guest console tail go to
// stderr.
//
// Between packages the guest prints any network namespace or BIRD process a
// package left behind (one VM now hosts them all, so a leak would reach the
// next package).
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/birdcage/birdcage/ci/testlist"
	"github.com/birdcage/birdcage/internal/env"
	bcrun "github.com/birdcage/birdcage/internal/run"
)

type entry struct {
	pkg        string // ./topo
	importPath string
	dir        string
	env        []string // NAME=value, set for this entry's run only
	args       []string
	bin        string // built test binary; "" when the build failed
}

func main() {
	runner := flag.String("exec", "ci/vm/run", "the VM runner")
	timeout := flag.String("timeout", "40m", "each test binary's -test.timeout")
	list := flag.String("list", "", "a file of `./pkg TestName[/sub]` lines")
	keep := flag.Bool("keep", false, "keep the build directory (test binaries, guest script)")
	flag.Parse()
	entries, err := plan(*list, flag.Args())
	if err == nil && len(entries) == 0 {
		err = errors.New("nothing to run: give -list or -- ./pkg groups")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gotest:", err)
		os.Exit(2)
	}
	runnerPath, err := filepath.Abs(*runner)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gotest:", err)
		os.Exit(2)
	}
	// Named for this process (birdcage clean removes it once the process
	// is gone), and removed on SIGTERM and Ctrl-C as well as at the end.
	work, err := os.MkdirTemp("", bcrun.ProcessTempPattern("vmtests"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "gotest:", err)
		os.Exit(2)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, os.Interrupt)
	go func() {
		s := <-sigs
		if !*keep {
			os.RemoveAll(work)
		}
		fmt.Fprintf(os.Stderr, "gotest: %v: stopped\n", s)
		os.Exit(128 + int(s.(syscall.Signal)))
	}()
	code := run(entries, runnerPath, *timeout, work, os.Stdout, json.NewEncoder(os.Stdout))
	if *keep {
		fmt.Fprintln(os.Stderr, "gotest: build directory kept:", work)
	} else {
		os.RemoveAll(work)
	}
	os.Exit(code)
}

// event is a `go test -json` event (cmd/test2json's fields).
type event struct {
	Time        *time.Time `json:",omitempty"`
	Action      string
	Package     string   `json:",omitempty"`
	Test        string   `json:",omitempty"`
	Output      string   `json:",omitempty"`
	Elapsed     *float64 `json:",omitempty"`
	FailedBuild string   `json:",omitempty"`
}

func emit(enc *json.Encoder, e event) {
	now := time.Now()
	e.Time = &now
	enc.Encode(e)
}

func run(entries []*entry, runner, timeout, work string, stdout io.Writer, enc *json.Encoder) int {
	t2j := filepath.Join(work, "test2json")
	if b, err := exec.Command("go", "build", "-o", t2j, "cmd/test2json").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "gotest: building cmd/test2json: %v\n%s", err, b)
		return 2
	}
	var runnable []*entry
	status := 0
	built := map[string]string{} // package -> its test binary, built once
	for i, e := range entries {
		if bin, ok := built[e.pkg]; ok {
			e.bin = bin
			runnable = append(runnable, e)
			continue
		}
		bin := filepath.Join(work, fmt.Sprintf("%d-%s.test", i, filepath.Base(e.importPath)))
		start := time.Now()
		b, err := exec.Command("go", "test", "-c", "-o", bin, e.pkg).CombinedOutput()
		if err != nil {
			// As go test -json reports a package that does not build.
			emit(enc, event{Action: "start", Package: e.importPath})
			emit(enc, event{Action: "output", Package: e.importPath, Output: string(b)})
			emit(enc, event{Action: "output", Package: e.importPath, Output: "FAIL\t" + e.importPath + " [build failed]\n"})
			el := time.Since(start).Seconds()
			emit(enc, event{Action: "fail", Package: e.importPath, Elapsed: &el, FailedBuild: e.importPath})
			status = 1
			continue
		}
		e.bin = bin
		built[e.pkg] = bin
		runnable = append(runnable, e)
	}
	if len(runnable) == 0 {
		return 1
	}
	script := filepath.Join(work, "guest.sh")
	if err := os.WriteFile(script, []byte(guestScript(runnable, t2j, timeout)), 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "gotest:", err)
		return 2
	}
	cmd := exec.Command(runner, "/bin/sh", script)
	cmd.Stderr = os.Stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gotest:", err)
		return 2
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "gotest: %s: %v\n", runner, err)
		return 2
	}
	tr := newTracker()
	sc := bufio.NewScanner(pipe)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Bytes()
		tr.see(line)
		stdout.Write(line)
		stdout.Write([]byte("\n"))
	}
	werr := cmd.Wait()
	code := 0
	var exit *exec.ExitError
	if errors.As(werr, &exit) {
		code = exit.ExitCode()
	} else if werr != nil {
		code = 2
	}
	why := fmt.Sprintf("the VM ended (%s exit %d) before this package finished", filepath.Base(runner), code)
	switch code {
	case 124:
		why += ": the VM timed out (" + env.VMTimeout + "); the guest's log is above"
	case 125:
		why += ": the guest crashed or never ran the command; the guest's log is above"
	}
	if tr.closeOut(runnable, why, enc) {
		status = 1
	}
	if code != 0 {
		status = 1
	}
	return status
}

// guestScript runs each test binary in its package directory, as go test
// does, under test2json; afterwards it names what the package left behind.
func guestScript(entries []*entry, t2j, timeout string) string {
	var b strings.Builder
	b.WriteString("# written by ci/vm/gotest\nstatus=0\n")
	for _, e := range entries {
		fmt.Fprintf(&b, "cd %s || exit 126\n", shq(e.dir))
		for _, kv := range e.env {
			name, value, _ := strings.Cut(kv, "=")
			fmt.Fprintf(&b, "%s=%s ", name, shq(value))
		}
		fmt.Fprintf(&b, "%s -t -p %s %s -test.v=test2json -test.paniconexit0 -test.timeout=%s", shq(t2j), shq(e.importPath), shq(e.bin), shq(timeout))
		for _, a := range e.args {
			b.WriteString(" " + shq(a))
		}
		b.WriteString(" || status=1\n")
		fmt.Fprintf(&b, "left=$( (ip netns list 2>/dev/null | grep -E '^bc'; pgrep -a -x bird) | tr '\\n' ' ')\n")
		fmt.Fprintf(&b, "[ -z \"$left\" ] || echo \"gotest: %s left behind in the VM: $left\" >&2\n", e.pkg)
	}
	b.WriteString("exit $status\n")
	return b.String()
}

func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// tracker follows the stream: how many runs of each package began and
// ended, and which tests the current run has open. The entries run one
// after the other, so the k-th run of a package is its k-th entry's.
type tracker struct {
	began, ended map[string]int
	open         map[string]map[string]bool // package -> tests started, not ended
	order        map[string][]string        // the current run's tests, in order
}

func newTracker() *tracker {
	return &tracker{began: map[string]int{}, ended: map[string]int{}, open: map[string]map[string]bool{}, order: map[string][]string{}}
}

func (t *tracker) see(line []byte) {
	var e event
	if json.Unmarshal(line, &e) != nil || e.Package == "" {
		return
	}
	p := e.Package
	// test2json starts each run with a "start" event; any other event of
	// a package whose runs have all ended begins one too.
	if e.Action == "start" || t.began[p] == t.ended[p] {
		t.began[p]++
		t.open[p], t.order[p] = map[string]bool{}, nil
	}
	switch e.Action {
	case "run":
		t.open[p][e.Test] = true
		t.order[p] = append(t.order[p], e.Test)
	case "pass", "fail", "skip":
		if e.Test == "" {
			t.ended[p]++
		} else {
			delete(t.open[p], e.Test)
		}
	}
}

// closeOut writes fail events for every entry whose run did not end: the
// tests it had open (innermost first, naming the test) and the package; an
// entry that never began gets its start event first. It reports whether it
// wrote any.
func (t *tracker) closeOut(entries []*entry, why string, enc *json.Encoder) bool {
	any := false
	nth := map[string]int{} // entries of each package seen so far
	for _, e := range entries {
		p := e.importPath
		k := nth[p]
		nth[p]++
		if t.ended[p] > k {
			continue
		}
		any = true
		var open []string
		if t.began[p] > k {
			for _, name := range t.order[p] {
				if t.open[p][name] {
					open = append(open, name)
					delete(t.open[p], name)
				}
			}
		} else {
			emit(enc, event{Action: "start", Package: p})
		}
		sort.Sort(sort.Reverse(sort.StringSlice(open))) // subtests before parents
		for _, name := range open {
			emit(enc, event{Action: "output", Package: p, Test: name, Output: "gotest: " + why + " (" + name + " was running)\n"})
			emit(enc, event{Action: "fail", Package: p, Test: name})
		}
		emit(enc, event{Action: "output", Package: p, Output: "FAIL\t" + p + ": " + why + "\n"})
		emit(enc, event{Action: "fail", Package: p})
	}
	return any
}

// plan reads the -list file and the `-- ./pkg args` groups into entries,
// with each package's import path and directory.
func plan(list string, groups []string) ([]*entry, error) {
	var entries []*entry
	if list != "" {
		es, err := fromList(list)
		if err != nil {
			return nil, err
		}
		entries = append(entries, es...)
	}
	var cur *entry
	var pending []string // NAME=value before the group's package
	noPackage := func() error {
		return fmt.Errorf("%q: a group with variables and no package", strings.Join(pending, " "))
	}
	for _, a := range groups {
		switch {
		case a == "--":
			if pending != nil {
				return nil, noPackage()
			}
			cur = nil
		case cur == nil:
			if envAssignment(a) {
				pending = append(pending, a)
				continue
			}
			if !strings.HasPrefix(a, "./") {
				return nil, fmt.Errorf("%q: want NAME=value or a package path ./pkg after --", a)
			}
			cur = &entry{pkg: a, env: pending}
			pending = nil
			entries = append(entries, cur)
		default:
			cur.args = append(cur.args, a)
		}
	}
	if pending != nil {
		return nil, noPackage()
	}
	for _, e := range entries {
		b, err := exec.Command("go", "list", "-f", "{{.ImportPath}}\t{{.Dir}}", e.pkg).Output()
		if err != nil {
			return nil, fmt.Errorf("go list %s: %v", e.pkg, err)
		}
		ip, dir, ok := strings.Cut(strings.TrimSpace(string(b)), "\t")
		if !ok {
			return nil, fmt.Errorf("go list %s: %q", e.pkg, b)
		}
		e.importPath, e.dir = ip, dir
	}
	return entries, nil
}

// fromList builds one entry per package of a `./pkg TestName[/sub]` file,
// with -test.run=^(A|B)$/^(x|y)$ from its lines.
func fromList(path string) ([]*entry, error) {
	es, err := testlist.Read(path)
	if err != nil {
		return nil, err
	}
	type sel struct{ tops, subs []string }
	sels := map[string]*sel{}
	var pkgs []string
	add := func(xs []string, x string) []string {
		for _, y := range xs {
			if y == x {
				return xs
			}
		}
		return append(xs, x)
	}
	for _, e := range es {
		s := sels[e.Package]
		if s == nil {
			s = &sel{}
			sels[e.Package] = s
			pkgs = append(pkgs, e.Package)
		}
		top, sub, hasSub := strings.Cut(e.Test, "/")
		s.tops = add(s.tops, top)
		if hasSub {
			s.subs = add(s.subs, sub)
		}
	}
	sort.Strings(pkgs)
	var out []*entry
	for _, p := range pkgs {
		s := sels[p]
		sort.Strings(s.tops)
		sort.Strings(s.subs)
		pat := "^(" + strings.Join(s.tops, "|") + ")$"
		if len(s.subs) > 0 {
			pat += "/^(" + strings.Join(s.subs, "|") + ")$"
		}
		out = append(out, &entry{pkg: p, args: []string{"-test.run=" + pat}})
	}
	return out, nil
}

// envAssignment reports whether a is NAME=value, NAME a shell variable name.
func envAssignment(a string) bool {
	name, _, ok := strings.Cut(a, "=")
	if !ok || name == "" {
		return false
	}
	for i, c := range name {
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
