package caliconode

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/birdcage/birdcage/internal/testenv"
)

func TestIsImageRef(t *testing.T) {
	dir := t.TempDir()
	for src, want := range map[string]bool{
		"calico/node:v3.33.0":                  true,
		"quay.io/calico/node:v3.32.1":          true,
		"registry.local:5000/team/node:dev-1":  true,
		"calico/node":                          true,
		"/work/calico-build/node-3.33":         false, // a path, existing or not
		"./node-3.33":                          false,
		"../builds/node":                       false,
		dir:                                    false,
		"":                                     false,
		"Calico/Node:v1":                       false, // repositories are lower case
		"calico/node:v3.33.0@sha256:" + "0123": false, // a digest is 64 hex digits
	} {
		if got := IsImageRef(src); got != want {
			t.Errorf("IsImageRef(%q) = %v, want %v", src, got, want)
		}
	}
}

func TestPlanExport(t *testing.T) {
	p := PlanExport("/usr/bin/podman", "calico/node:v3.33.0", "/c/export-1/rootfs.tar")
	for name, got := range map[string][]string{"ID": p.ID, "Pull": p.Pull, "Create": p.Create, "Export": p.Export, "Remove": p.Remove} {
		want := map[string][]string{
			"ID":     {"/usr/bin/podman", "image", "inspect", "--format", "{{.Id}}", "calico/node:v3.33.0"},
			"Pull":   {"/usr/bin/podman", "pull", "calico/node:v3.33.0"},
			"Create": {"/usr/bin/podman", "create", "calico/node:v3.33.0", "/birdcage-export-only"},
			"Export": {"/usr/bin/podman", "export", "-o", "/c/export-1/rootfs.tar", "CONTAINER"},
			"Remove": {"/usr/bin/podman", "rm", "CONTAINER"},
		}[name]
		if !slices.Equal(got, want) {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	// The cache directory is an overlay layer: no ':' or ','.
	if n := cacheName("registry.local:5000/calico/node:v3.33.0", "sha256:7a4522b0cec97f08abe2"); n != "registry.local_5000_calico_node_v3.33.0@7a4522b0cec9" {
		t.Errorf("cacheName = %q", n)
	}
}

func TestExportImageWithoutATool(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := Open(context.Background(), "calico/node:v3.33.0")
	if err == nil || !strings.Contains(err.Error(), "neither docker nor podman is on PATH") || !strings.Contains(err.Error(), "give the directory") {
		t.Errorf("without docker or podman: %v", err)
	}
}

// TestExportImage imports a tiny directory laid out like the calico/node
// image (scripts where the binaries go) as a local image and opens it by
// reference: exported through the tool, cached, and laid out as the image
// was. It needs docker with a running daemon, or podman.
func TestExportImage(t *testing.T) {
	tool, err := ImageTool()
	if err != nil {
		testenv.Missing(t, testenv.Docker, err.Error())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, tool, "info").CombinedOutput(); err != nil {
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		testenv.Missing(t, testenv.Docker, tool+" info (no daemon?): "+strings.TrimSpace(lines[len(lines)-1]))
	}
	src := t.TempDir()
	for _, f := range []string{"usr/bin/calico", "bin/bird", "bin/birdcl"} {
		p := filepath.Join(src, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("#!/bin/sh\necho "+f+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(src, "etc/calico/confd/conf.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	ref := "birdcage-test/calico-node-layout:" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	imp := exec.CommandContext(ctx, "sh", "-c", `tar -C "$1" -c . | "$2" import - "$3"`, "sh", src, tool, ref)
	if out, err := imp.CombinedOutput(); err != nil {
		t.Fatalf("%s import: %v: %s", tool, err, out)
	}
	t.Cleanup(func() { exec.Command(tool, "rmi", ref).Run() })

	cache := t.TempDir()
	dir, err := ExportImage(ctx, ref, cache)
	if err != nil {
		t.Fatal(err)
	}
	s, err := OpenSource(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s.Layout != LayoutComponent || s.Userland {
		t.Errorf("exported source: %+v, want the component layout without a userland", s)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "bin/bird")); err != nil || !strings.Contains(string(b), "bin/bird") {
		t.Errorf("bin/bird after export: %q, %v", b, err)
	}
	// A second open reuses the export.
	again, err := ExportImage(ctx, ref, cache)
	if err != nil || again != dir {
		t.Errorf("second export: %q, %v; want %q again", again, err, dir)
	}
	if ents, _ := os.ReadDir(cache); len(ents) != 1 {
		t.Errorf("cache holds %d entries, want the one export (no leftovers)", len(ents))
	}
}
