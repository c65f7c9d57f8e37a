package bird

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/birdcage/birdcage/dataplane/bird/release"
	"github.com/birdcage/birdcage/internal/run"
)

// DefaultCache is where ci/bird-releases keeps prepared releases.
const DefaultCache = "/var/cache/birdcage/bird"

// ErrReleaseMissing is wrapped when a BIRD release is not prepared on this
// machine (run ci/bird-releases RELEASE).
var ErrReleaseMissing = errors.New("BIRD release not prepared")

// Release is a BIRD release ready to run: the host's own BIRD (Rootfs
// empty) or a root filesystem ci/bird-releases unpacked from Debian's
// packages.
type Release struct {
	Name release.Name
	// Package is the Debian package and version ("bird2 2.17.6-0+deb13u1"),
	// or "host" plus the host's `bird --version`.
	Package string
	// Rootfs is the release's root filesystem; empty for the host's BIRD.
	Rootfs string
}

// HostRelease is the default: the host's /usr/sbin/bird (Debian bird2).
func HostRelease() Release {
	return Release{Name: release.Default, Package: "host bird2"}
}

// CacheDir is cache (the run's $BIRDCAGE_BIRD_CACHE, from internal/env),
// else DefaultCache.
func CacheDir(cache string) string {
	if cache != "" {
		return cache
	}
	return DefaultCache
}

// FindRelease finds release name ("" is the default): the default 2.0 runs
// the host's bird2 when it is installed (else its prepared rootfs); every
// other release runs from <cache>/<name>/rootfs. A release that is not
// prepared gives an error wrapping ErrReleaseMissing that says how to
// prepare it.
func FindRelease(cache, name string) (Release, error) {
	n, err := release.Parse(name)
	if err != nil {
		return Release{}, err
	}
	if n == release.Default {
		if out, err := exec.Command("/usr/sbin/bird", "--version").CombinedOutput(); err == nil && strings.Contains(string(out), " 2.0") {
			return Release{Name: n, Package: "host " + strings.TrimSpace(string(out))}, nil
		}
	}
	dir := filepath.Join(CacheDir(cache), string(n))
	root := filepath.Join(dir, "rootfs")
	ver, verr := os.ReadFile(filepath.Join(dir, "version"))
	if _, err := os.Stat(filepath.Join(root, "usr/sbin/bird")); err != nil || verr != nil {
		return Release{}, fmt.Errorf("BIRD %s: %w in %s (run: sudo ci/bird-releases %s)", n, ErrReleaseMissing, dir, n)
	}
	return Release{Name: n, Package: strings.TrimSpace(string(ver)), Rootfs: root}, nil
}

// Command is the host-side command line that runs one of the release's
// binaries (bird, bird6, birdc) outside a container: the host's own binary,
// or the rootfs's binary under the rootfs's own dynamic loader and
// libraries, so a trixie binary gets trixie's libc.
func (r Release) Command(binary string, args ...string) *exec.Cmd {
	if r.Rootfs == "" {
		return exec.Command(filepath.Join("/usr/sbin", binary), args...)
	}
	var libs []string
	for _, d := range []string{"usr/lib/x86_64-linux-gnu", "lib/x86_64-linux-gnu"} {
		if fi, err := os.Stat(filepath.Join(r.Rootfs, d)); err == nil && fi.IsDir() {
			libs = append(libs, filepath.Join(r.Rootfs, d))
		}
	}
	ld := filepath.Join(r.Rootfs, "lib64/ld-linux-x86-64.so.2")
	return exec.Command(ld, append([]string{"--library-path", strings.Join(libs, ":"), filepath.Join(r.Rootfs, "usr/sbin", binary)}, args...)...)
}

// Validate runs the release's own `bird -p` (daemon "bird6" for a 1.6
// IPv6 config) on conf.
func (r Release) Validate(daemon string, conf []byte) error {
	if daemon == "" {
		daemon = "bird"
	}
	// Named for this process, so `birdcage clean` removes it if the
	// process is killed before the deferred remove.
	f, err := os.CreateTemp("", run.ProcessTempPattern("validate")+"*.conf")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(conf); err != nil {
		f.Close()
		return err
	}
	f.Close()
	out, err := r.Command(daemon, "-p", "-c", f.Name()).CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(strings.ReplaceAll(string(out), f.Name(), daemon+".conf"))
		return fmt.Errorf("%w (BIRD %s %s): %s", ErrInvalidConfig, r.Name, daemon, msg)
	}
	return nil
}

// SetRelease changes the release the next Start runs (an upgrade of BIRD
// itself); the instance must not be running, and its daemon must exist in
// the new release.
func (b *Instance) SetRelease(r Release) error {
	if b.Running() {
		return fmt.Errorf("bird %s: change release to %s: still running", b.name, r.Name)
	}
	if b.daemon == "bird6" && !r.Name.TwoDaemons() {
		return fmt.Errorf("bird %s: change release to %s: no bird6 daemon there", b.name, r.Name)
	}
	b.mu.Lock()
	b.rel = r
	b.mu.Unlock()
	return b.ensurePair()
}
