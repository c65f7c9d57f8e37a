package caliconode

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// layout writes the files OpenSource looks for under dir.
func layout(t *testing.T, dir string, files ...string) {
	t.Helper()
	for _, f := range files {
		p := filepath.Join(dir, f)
		if strings.HasSuffix(f, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func TestOpenSourceReadsTheImagesLayout(t *testing.T) {
	confd := "etc/calico/confd/conf.d/"
	for _, tc := range []struct {
		name     string
		files    []string
		layout   Layout
		userland bool
		err      string
	}{
		{"3.33 build", []string{"usr/bin/calico", "bin/bird", "bin/birdcl", confd}, LayoutComponent, false, ""},
		{"3.32 build", []string{"bin/calico-node", "bin/bird", "bin/birdcl", confd}, LayoutFlags, false, ""},
		{"an exported image", []string{"usr/bin/calico", "usr/bin/bird", "usr/bin/birdcl", "usr/bin/sh", confd}, LayoutComponent, true, ""},
		{"no Calico binary", []string{"bin/bird", "bin/birdcl", confd}, "", false, "neither usr/bin/calico (3.33) nor bin/calico-node"},
		{"no BIRD", []string{"usr/bin/calico", confd}, "", false, "no bin/bird"},
		{"no templates", []string{"usr/bin/calico", "bin/bird", "bin/birdcl"}, "", false, "no etc/calico/confd/conf.d"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			layout(t, dir, tc.files...)
			s, err := OpenSource(dir)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("OpenSource: %v; want an error saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.Layout != tc.layout || s.Userland != tc.userland {
				t.Errorf("layout %q userland %v; want %q %v", s.Layout, s.Userland, tc.layout, tc.userland)
			}
		})
	}
	if _, err := OpenSource("/nonexistent/a:b"); err == nil || !strings.Contains(err.Error(), "may not contain") {
		t.Errorf("a path with ':' (an overlay layer separator): %v", err)
	}
}

func TestServiceCommandsAreTheRunScripts(t *testing.T) {
	c := Source{Layout: LayoutComponent}
	f := Source{Layout: LayoutFlags}
	for _, tc := range []struct {
		got, want string
	}{
		{strings.Join(c.command("felix"), " "), "/usr/bin/calico component felix"},
		{strings.Join(c.command("confd"), " "), "/usr/bin/calico component confd"},
		{strings.Join(c.command("version"), " "), "/usr/bin/calico version"},
		{strings.Join(f.command("felix"), " "), "/bin/calico-node -felix"},
		{strings.Join(f.command("confd"), " "), "/bin/calico-node -confd"},
		{strings.Join(f.command("version"), " "), "/bin/calico-node -v"},
	} {
		if tc.got != tc.want {
			t.Errorf("%q, want %q", tc.got, tc.want)
		}
	}
	if v := firstVersionLine("Version:      v3.33.0-0.dev-1478-g6609dea54713\nBuild date: x\n"); v != "v3.33.0-0.dev-1478-g6609dea54713" {
		t.Errorf("firstVersionLine: %q", v)
	}
}
