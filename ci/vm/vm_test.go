// These tests hold ci/vm/run to its contract: the guest command's exit status,
// stdout, stderr, environment and cwd come back to the caller; the guest kernel
// has ipip (every new netns gets a fallback tunl0); a timeout, a guest kernel
// panic and an interrupted runner all end with a clear status; and no QEMU
// process or per-run temp dir is left behind in any of those paths.
//
// Each test boots a VM (~5-10 s under TCG), so they run only with
// BIRDCAGE_VM_TESTS=1 (CI sets it after ci/vm/prepare-kernel). Boots are
// kept to what a claim needs (13 in all), and the tests that judge no time
// run two at a time (t.Parallel); those that do (timeout, interrupt, the KVM
// fallback and the boot watchdog) run alone.
package vm

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/birdcage/birdcage/internal/env"
	"github.com/birdcage/birdcage/internal/testenv"
)

// runner returns the absolute path of ci/vm/run, or skips (or fails, when the
// VM tests were asked for) saying what is missing.
func runner(t *testing.T) string {
	t.Helper()
	missing := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...)
		if testenv.Env().VMTests {
			t.Fatalf("%s=1 but %s", env.VMTests, msg)
		}
		t.Skipf("VM tests not run: %s (set %s=1 to boot VMs, ~2 min)", msg, env.VMTests)
	}
	if !testenv.Env().VMTests {
		t.Skip("VM tests not run: set " + env.VMTests + "=1 to boot VMs (~2 min); needs qemu-system-x86 and ci/vm/prepare-kernel")
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		missing("qemu-system-x86_64 not found: apt-get install qemu-system-x86")
	}
	cache := testenv.Env().KernelCache
	if cache == "" {
		cache = "/var/cache/birdcage/kernels"
	}
	if os.Getenv("KERNEL") == "" {
		if _, err := os.Stat(filepath.Join(cache, "default", "ready")); err != nil {
			missing("no prepared kernel in %s: run ci/vm/prepare-kernel", cache)
		}
	}
	run, err := filepath.Abs("run")
	if err != nil {
		t.Fatal(err)
	}
	return run
}

type result struct {
	code           int
	stdout, stderr string
	elapsed        time.Duration
}

// vmRun runs ci/vm/run with args, extra environment and a cwd, and checks that
// the run left no QEMU process and no temp dir behind.
func vmRun(t *testing.T, run string, vars []string, dir string, args ...string) result {
	t.Helper()
	cmd := exec.Command(run, args...)
	cmd.Env = append(os.Environ(), vars...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", run, err)
	}
	err := cmd.Wait()
	r := result{stdout: stdout.String(), stderr: stderr.String(), elapsed: time.Since(start)}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	default:
		t.Fatalf("%s %q: %v", run, args, err)
	}
	t.Logf("%q: exit %d after %.1f s", args, r.code, r.elapsed.Seconds())
	checkNoLeftovers(t, cmd.Process.Pid)
	return r
}

// checkNoLeftovers: the runner names its temp dir birdcage-vm.<pid>.* and QEMU
// gets paths inside it, so both are found by the runner's pid even while
// other VMs run on the machine.
func checkNoLeftovers(t *testing.T, pid int) {
	t.Helper()
	tmp := os.Getenv("TMPDIR")
	if tmp == "" {
		tmp = "/tmp"
	}
	marker := fmt.Sprintf("birdcage-vm.%d.", pid)
	if dirs, _ := filepath.Glob(filepath.Join(tmp, marker+"*")); len(dirs) > 0 {
		t.Errorf("runner %d left temp dirs behind: %v", pid, dirs)
	}
	// A SIGKILLed QEMU can take a moment to be reaped.
	deadline := time.Now().Add(5 * time.Second)
	for {
		procs := processesMentioning(marker)
		if len(procs) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("runner %d left processes behind: %v", pid, procs)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func processesMentioning(s string) []string {
	var found []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(b) == 0 { // gone, or a zombie (already dead)
			continue
		}
		if line := string(bytes.ReplaceAll(b, []byte{0}, []byte{' '})); strings.Contains(line, s) {
			found = append(found, e.Name()+": "+line)
		}
	}
	return found
}

// 1. The command's exit status, stdout and stderr come back unchanged.
func TestExitStatusAndStreams(t *testing.T) {
	run := runner(t)
	t.Parallel()
	for _, code := range []int{0, 3} {
		r := vmRun(t, run, nil, ".", "sh", "-c", fmt.Sprintf("echo out; echo err >&2; exit %d", code))
		if r.code != code || r.stdout != "out\n" || r.stderr != "err\n" {
			t.Errorf("exit %d: want code %d stdout %q stderr %q, got %d %q %q",
				code, code, "out\n", "err\n", r.code, r.stdout, r.stderr)
		}
	}
	// A signal inside the guest reads as the shell does: 128+n.
	if r := vmRun(t, run, nil, ".", "sh", "-c", "kill -9 $$"); r.code != 137 {
		t.Errorf("command killed by SIGKILL in the guest: want exit 137, got %d (stderr %q)", r.code, r.stderr)
	}
}

// 2. The guest command sees exactly the caller's environment and cwd. One
// boot: a command given relative to the cwd, as go test -exec does for a
// package-relative path, prints the cwd and then the environment.
func TestEnvironmentAndCwd(t *testing.T) {
	run := runner(t)
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "probe.sh"), []byte("#!/bin/sh\npwd\nexec /usr/bin/env -0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	odd := "spaces and 'quotes' \"double\" $dollar `tick` \\ newline\nend"
	r := vmRun(t, run, []string{env.Set(env.VMProbe, odd)}, dir, "./probe.sh")
	if r.code != 0 {
		t.Fatalf("./probe.sh in the guest: exit %d, stderr %q", r.code, r.stderr)
	}
	cwd, envs, _ := strings.Cut(r.stdout, "\n")
	if cwd != dir {
		t.Errorf("cwd in the guest: want %q, got %q", dir, cwd)
	}
	got := map[string]string{}
	for _, kv := range strings.Split(strings.TrimSuffix(envs, "\x00"), "\x00") {
		k, v, _ := strings.Cut(kv, "=")
		got[k] = v
	}
	if got[env.VMProbe] != odd {
		t.Errorf("%s in the guest: want %q, got %q", env.VMProbe, odd, got[env.VMProbe])
	}
	for _, k := range []string{"PATH", "HOME"} {
		if got[k] != os.Getenv(k) {
			t.Errorf("%s in the guest: want %q, got %q", k, os.Getenv(k), got[k])
		}
	}
}

// 3. The guest kernel has ipip: a fresh netns (unshare, ip netns add) gets the
// fallback tunl0; /var/run/netns, cgroup2 and bpffs are there; BIRD and runc
// from the host run. The modules every test needs are loaded (they come with
// the initramfs), and a BIRDCAGE_VM_MODULES extra that the initramfs does not
// carry (dummy) is loaded too: the modprobe path still works.
func TestGuestHasIPIP(t *testing.T) {
	run := runner(t)
	t.Parallel()
	script := `set -e
unshare -n ip -d link show tunl0
ip netns add birdcage-vm-test
ip -n birdcage-vm-test -d link show tunl0
stat -f -c %T /sys/fs/cgroup /sys/fs/bpf
bird --version 2>&1
runc --version | head -n1
for m in ipip veth bridge sch_ingress cls_bpf act_bpf dummy; do
	grep -q "^$m " /proc/modules && echo "module loaded: $m" || echo "module missing: $m"
done
`
	r := vmRun(t, run, []string{env.Set(env.VMModules, "dummy")}, ".", "sh", "-c", script)
	if r.code != 0 {
		t.Fatalf("guest smoke script: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if n := strings.Count(r.stdout, "ipip any remote any local any"); n != 2 {
		t.Errorf("want a fallback ipip tunl0 in both new netns, saw %d:\n%s", n, r.stdout)
	}
	for _, m := range []string{"ipip", "veth", "bridge", "sch_ingress", "cls_bpf", "act_bpf", "dummy"} {
		if !strings.Contains(r.stdout, "module loaded: "+m+"\n") {
			t.Errorf("module %s is not loaded in the guest:\n%s", m, r.stdout)
		}
	}
	for _, want := range []string{"cgroup2fs", "bpf_fs", "BIRD version", "runc version"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("guest smoke output lacks %q:\n%s", want, r.stdout)
		}
	}
}

// 4. A command that outlives BIRDCAGE_VM_TIMEOUT: the VM is killed, the guest
// kernel log is printed, the exit status is 124. The guest copies its boot
// log for the host just before it starts the command, so the timeout leaves
// room for a slow boot: under TCG on a loaded machine the guest was still
// booting 15 s in, and the host had only the heartbeat to print.
func TestTimeout(t *testing.T) {
	run := runner(t)
	r := vmRun(t, run, []string{env.Set(env.VMTimeout, "30s")}, ".", "sleep", "600")
	if r.code != 124 || !strings.Contains(r.stderr, "timeout after 30s") || !strings.Contains(r.stderr, "Run /init as init process") {
		t.Errorf("timeout: want exit 124 and the kernel log tail, got %d, stderr:\n%s", r.code, r.stderr)
	}
	if r.elapsed > 60*time.Second {
		t.Errorf("timeout of 30s took %v", r.elapsed)
	}
}

// 5. A guest kernel panic ends the run at once with 125 and the panic in the
// printed log.
func TestGuestPanic(t *testing.T) {
	run := runner(t)
	t.Parallel()
	r := vmRun(t, run, nil, ".", "sh", "-c", "echo c >/proc/sysrq-trigger")
	if r.code != 125 || !strings.Contains(r.stderr, "Kernel panic") {
		t.Errorf("guest panic: want exit 125 and \"Kernel panic\" in stderr, got %d:\n%s", r.code, r.stderr)
	}
}

// 5b. A soft lockup is a panic too: the guest kernel runs with
// softlockup_panic=1, so a hung guest ends the run as test 5 does instead of
// at the VM timeout. Read back from the guest's sysctl; the control boots
// with the setting overridden (a later kernel parameter wins) and must read 0.
func TestGuestSoftLockupPanics(t *testing.T) {
	run := runner(t)
	t.Parallel()
	for _, c := range []struct {
		env  []string
		want string
	}{{nil, "1"}, {[]string{env.Set(env.VMAppend, "softlockup_panic=0")}, "0"}} {
		r := vmRun(t, run, c.env, ".", "cat", "/proc/sys/kernel/softlockup_panic")
		if r.code != 0 || strings.TrimSpace(r.stdout) != c.want {
			t.Errorf("env %v: softlockup_panic reads %q (exit %d), want %s:\n%s", c.env, r.stdout, r.code, c.want, r.stderr)
		}
	}
}

// 6. Ctrl-C (SIGINT) and SIGTERM to the runner stop the VM and clean up.
func TestInterrupt(t *testing.T) {
	run := runner(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		cmd := exec.Command(run, "sh", "-c", "echo started; sleep 600")
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout = pw
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pw.Close()
		buf := make([]byte, 64)
		n, _ := pr.Read(buf) // blocks until the guest command runs
		if !strings.Contains(string(buf[:n]), "started") {
			t.Fatalf("guest command did not start: %q", buf[:n])
		}
		start := time.Now()
		cmd.Process.Signal(sig)
		err = cmd.Wait()
		pr.Close()
		code := cmd.ProcessState.ExitCode()
		t.Logf("%v: runner exit %d after %v (%v)", sig, code, time.Since(start), err)
		if want := 128 + int(sig); code != want {
			t.Errorf("%v: want runner exit %d, got %d", sig, want, code)
		}
		checkNoLeftovers(t, cmd.Process.Pid)
	}
}

// 7. go test -exec: the test binary runs in the guest with the package dir as
// cwd and its result comes back. go resolves a relative -exec path against the
// package dir, not the caller's cwd, so from the repo root the runner is given
// as an absolute path ("$PWD/ci/vm/run"); from the package dir "./run" works.
// TestHelperInsideVM is the test that runs in the guest.
func TestGoTestExec(t *testing.T) {
	run := runner(t)
	t.Parallel()
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ dir, exec, pkg string }{
		{repo, run, "./ci/vm"},
		{filepath.Join(repo, "ci", "vm"), "./run", "."},
	} {
		cmd := exec.Command(gobin, "test", "-count=1", "-exec", c.exec, "-run", "^TestHelperInsideVM$", "-v", c.pkg)
		cmd.Dir = c.dir
		cmd.Env = append(os.Environ(), env.Set(env.VMInside, "1"))
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestHelperInsideVM") {
			t.Errorf("in %s: go test -exec %s %s: %v\n%s", c.dir, c.exec, c.pkg, err, out)
		}
	}
}

// TestHelperInsideVM runs only under ci/vm/run (TestGoTestExec sets
// BIRDCAGE_VM_INSIDE=1, which also shows the environment got through).
func TestHelperInsideVM(t *testing.T) {
	if !testenv.Env().VMInside {
		t.Skip("runs only inside the VM, started by TestGoTestExec")
	}
	if h, _ := os.Hostname(); h != "birdcage-vm" {
		t.Fatalf("hostname %q: not in the birdcage VM", h)
	}
	wd, _ := os.Getwd()
	if filepath.Base(wd) != "vm" {
		t.Errorf("cwd %q: want the package dir ci/vm", wd)
	}
	if _, err := os.Stat("/sys/module/ipip"); err != nil {
		t.Errorf("ipip module not loaded in the guest: %v", err)
	}
}

// fakeKVM puts a qemu-system-x86_64 stand-in first on PATH that behaves as an
// unusable KVM does when asked for accel=kvm (mode "hang": never prints a
// byte, as with -cpu kvm64 on a KVM that cannot run a guest; mode "abort":
// exits 134 at once, as QEMU does when the kernel refuses its MSRs) and runs
// the real QEMU otherwise. It returns the environment for ci/vm/run: the
// stand-in on PATH, a fake KVM device node that is readable and writable, a
// private verdict cache, and the log of the stand-in's invocations.
func fakeKVM(t *testing.T, mode string) (vars []string, invocations string) {
	t.Helper()
	real, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	invocations = filepath.Join(dir, "invocations")
	kvmBranch := map[string]string{
		"hang":  "while :; do sleep 1; done",
		"abort": `echo "qemu-system-x86_64: error: failed to set MSR 0x10a to 0x69" >&2; exit 134`,
	}[mode]
	script := fmt.Sprintf(`#!/bin/bash
[ "$1" = --version ] && exec %[1]q --version
echo "$*" >>%[2]q
case "$*" in *accel=kvm*) %[3]s ;; esac
exec %[1]q "$@"
`, real, invocations, kvmBranch)
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bin", "qemu-system-x86_64"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	dev := filepath.Join(dir, "kvm")
	if err := os.WriteFile(dev, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{
		"PATH=" + filepath.Join(dir, "bin") + ":" + os.Getenv("PATH"),
		env.Set(env.VMKVMDevice, dev),
		env.Set(env.VMAccelCache, filepath.Join(dir, "accel")),
		env.Set(env.VMAccel, ""),
	}, invocations
}

// timedRun runs ci/vm/run and records when each stderr line arrived.
type timedLine struct {
	at   time.Duration
	text string
}

func timedRun(t *testing.T, run string, vars []string, args ...string) (result, []timedLine) {
	t.Helper()
	cmd := exec.Command(run, args...)
	cmd.Env = append(os.Environ(), vars...)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = pw
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	var lines []timedLine
	done := make(chan struct{})
	go func() {
		defer close(done)
		var buf bytes.Buffer
		chunk := make([]byte, 4096)
		for {
			n, err := pr.Read(chunk)
			buf.Write(chunk[:n])
			for {
				line, rest, ok := bytes.Cut(buf.Bytes(), []byte("\n"))
				if !ok {
					break
				}
				lines = append(lines, timedLine{time.Since(start), string(line)})
				buf = *bytes.NewBuffer(append([]byte(nil), rest...))
			}
			if err != nil {
				return
			}
		}
	}()
	werr := cmd.Wait()
	<-done
	pr.Close()
	r := result{stdout: stdout.String(), elapsed: time.Since(start)}
	for _, l := range lines {
		r.stderr += l.text + "\n"
	}
	var exit *exec.ExitError
	if errors.As(werr, &exit) {
		r.code = exit.ExitCode()
	} else if werr != nil {
		t.Fatal(werr)
	}
	t.Logf("%q: exit %d after %.1f s", args, r.code, r.elapsed.Seconds())
	checkNoLeftovers(t, cmd.Process.Pid)
	return r, lines
}

func lineWith(lines []timedLine, s string) (timedLine, bool) {
	for _, l := range lines {
		if strings.Contains(l.text, s) {
			return l, true
		}
	}
	return timedLine{}, false
}

// 8. A /dev/kvm that exists and is writable but cannot run a guest: the
// runner proves it with a probe boot, falls back to TCG within the probe
// deadline, says so in one line, runs the command, and caches the verdict so
// the next run does not probe again. The probe deadline is given in seconds
// and the runner's watchdog reads bash's SECONDS (1 s resolution) every
// 0.1 s, so the fallback line may come up to ~1.1 s after the deadline plus
// the time to stop QEMU; 3 s of slack covers that.
func TestUnusableKVMFallsBackToTCG(t *testing.T) {
	run := runner(t)
	const probe = 5 * time.Second
	const slack = 3 * time.Second
	for _, mode := range []string{"hang", "abort"} {
		t.Run(mode, func(t *testing.T) {
			vars, invocations := fakeKVM(t, mode)
			vars = append(vars, env.Set(env.VMKVMProbeDeadline, fmt.Sprintf("%ds", int(probe.Seconds()))))
			r, lines := timedRun(t, run, vars, "sh", "-c", "echo ran; echo $"+env.VMAccelUsed)
			if r.code != 0 || r.stdout != "ran\ntcg\n" {
				t.Fatalf("want the command to run under TCG (stdout \"ran\\ntcg\\n\", exit 0), got exit %d stdout %q stderr:\n%s", r.code, r.stdout, r.stderr)
			}
			fb, ok := lineWith(lines, "present but unusable")
			if !ok || !strings.Contains(fb.text, "using TCG") {
				t.Fatalf("want one line saying the KVM device is unusable and TCG is used, stderr:\n%s", r.stderr)
			}
			if fb.at > probe+slack {
				t.Errorf("fallback said %.1f s after start; the probe deadline is %v (+%v slack)", fb.at.Seconds(), probe, slack)
			}
			want := map[string]string{"hang": "no guest output in 5s", "abort": "QEMU failed before the guest ran: qemu-system-x86_64: error: failed to set MSR"}[mode]
			if !strings.Contains(fb.text, want) {
				t.Errorf("fallback line should say why (%q): %q", want, fb.text)
			}
			kvmRuns := func() int {
				b, _ := os.ReadFile(invocations)
				return strings.Count(string(b), "accel=kvm")
			}
			if n := kvmRuns(); n != 1 {
				t.Errorf("want exactly one KVM probe boot, saw %d", n)
			}

			// The verdict is cached: no second probe, no second line.
			// (`run --accel` takes the same path as a run's choice of
			// accelerator, without booting a VM for it.)
			r, _ = timedRun(t, run, vars, "--accel")
			if r.code != 0 || r.stdout != "tcg\n" || strings.Contains(r.stderr, "unusable") {
				t.Errorf("second run (--accel): want \"tcg\" with no probe line, got exit %d stdout %q stderr:\n%s", r.code, r.stdout, r.stderr)
			}
			if n := kvmRuns(); n != 1 {
				t.Errorf("second run probed KVM again (%d KVM boots in all)", n)
			}
		})
	}
}

// 9. The boot watchdog: a VM whose guest never prints its heartbeat (KVM
// forced on a KVM that cannot run a guest) is killed at the boot deadline
// with exit 125 and a message naming the deadline, instead of waiting out
// BIRDCAGE_VM_TIMEOUT.
func TestBootWatchdog(t *testing.T) {
	run := runner(t)
	vars, _ := fakeKVM(t, "hang")
	vars = append(vars, env.Set(env.VMAccel, "kvm"), env.Set(env.VMBootDeadline, "5s"))
	r, lines := timedRun(t, run, vars, "echo", "never")
	if r.code != 125 || r.stdout != "" {
		t.Fatalf("want exit 125 and no output, got %d stdout %q stderr:\n%s", r.code, r.stdout, r.stderr)
	}
	l, ok := lineWith(lines, "no guest heartbeat within 5s")
	if !ok {
		t.Fatalf("want the watchdog to name the deadline, stderr:\n%s", r.stderr)
	}
	if l.at > 5*time.Second+3*time.Second {
		t.Errorf("watchdog fired %.1f s after start, deadline 5 s (+3 s slack, see test 8)", l.at.Seconds())
	}
}
