package run

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A host sysctl a run raised goes back when the run closes, when `clean`
// removes a killed run, and not when someone changed it since.
func TestHostSysctlRestored(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("runs need root (their state dir is under /run/birdcage)")
	}
	procSys = t.TempDir()
	t.Cleanup(func() { procSys = "/proc/sys" })
	const key = "net.ipv4.neigh.default.gc_thresh3"
	file := filepath.Join(procSys, "net/ipv4/neigh/default/gc_thresh3")
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(v string) {
		if err := os.WriteFile(file, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	read := func() string {
		b, _ := os.ReadFile(file)
		return strings.TrimSpace(string(b))
	}
	set := func() *Run {
		r, err := New()
		if err != nil {
			t.Fatal(err)
		}
		if err := r.SetHostSysctl(key, "4096"); err != nil {
			t.Fatal(err)
		}
		if got := read(); got != "4096" {
			t.Fatalf("after SetHostSysctl: %s, want 4096", got)
		}
		return r
	}

	write("1024")
	r := set()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != "1024" {
		t.Errorf("after Close: %s, want the original 1024", got)
	}

	// A run that never closed (killed): clean restores from its record.
	r = set()
	rep, err := Clean(CleanOptions{RunID: r.ID, Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := read(); got != "1024" || len(rep.Sysctls) != 1 || rep.Sysctls[0] != key+"=1024" {
		t.Errorf("after clean: %s (report %v), want 1024 restored and reported", got, rep.Sysctls)
	}
	_ = r.Close()

	// Changed by someone else after us: left as they set it.
	r = set()
	write("8192")
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != "8192" {
		t.Errorf("a value someone else set since was overwritten: %s, want 8192", got)
	}
}
