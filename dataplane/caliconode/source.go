package caliconode

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Layout is how a release's calico/node image names its Calico binary and
// starts Felix and confd from it.
type Layout string

const (
	// LayoutComponent is 3.33's: /usr/bin/calico, one cobra command whose
	// `component felix` and `component confd` are the services
	// (node/Dockerfile:162; node/filesystem/etc/service/available/*/run).
	LayoutComponent Layout = "component"
	// LayoutFlags is 3.31's and 3.32's: /bin/calico-node with -felix and
	// -confd (node/Dockerfile(.amd64); node/cmd/calico-node/main.go).
	LayoutFlags Layout = "flags"
)

// Source is a directory laid out like the calico/node image's root
// filesystem: an exported image, or a build laid out the same way.
type Source struct {
	// Dir is the absolute directory.
	Dir string
	// Layout says which binary and which subcommands start the services.
	Layout Layout
	// Userland is true when Dir carries its own shell and libraries (an
	// exported image); false when it holds only Calico's files, and the
	// host's userland (sh, iptables, ipset, libc) is bound in beside them.
	Userland bool
}

// OpenSource checks that dir is laid out like the calico/node image.
func OpenSource(dir string) (Source, error) {
	if dir == "" {
		return Source{}, fmt.Errorf("calico source: empty path: want a directory laid out like the calico/node image's root filesystem")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Source{}, err
	}
	// The overlay's lowerdir option separates layers with ':' and options
	// with ','.
	if strings.ContainsAny(abs, ":,") {
		return Source{}, fmt.Errorf("calico source %s: the path may not contain ':' or ',' (it becomes an overlay layer)", abs)
	}
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
		return Source{}, fmt.Errorf("calico source %s: not a directory (want the calico/node image's root filesystem: docker export, or a build laid out the same way)", abs)
	}
	s := Source{Dir: abs}
	switch {
	case executable(filepath.Join(abs, "usr/bin/calico")):
		s.Layout = LayoutComponent
	case executable(filepath.Join(abs, "bin/calico-node")):
		s.Layout = LayoutFlags
	default:
		return Source{}, fmt.Errorf("calico source %s: neither usr/bin/calico (3.33) nor bin/calico-node (3.31, 3.32) is an executable there", abs)
	}
	for _, b := range []string{"bin/bird", "bin/birdcl"} {
		if !executable(filepath.Join(abs, b)) && !executable(filepath.Join(abs, "usr", b)) {
			return Source{}, fmt.Errorf("calico source %s: no %s (the image copies Calico's BIRD fork to /bin)", abs, b)
		}
	}
	if fi, err := os.Stat(filepath.Join(abs, "etc/calico/confd/conf.d")); err != nil || !fi.IsDir() {
		return Source{}, fmt.Errorf("calico source %s: no etc/calico/confd/conf.d (confd's templates)", abs)
	}
	s.Userland = exists(filepath.Join(abs, "bin/sh")) || exists(filepath.Join(abs, "usr/bin/sh"))
	return s, nil
}

// calico is the Calico binary's path inside the container and the
// arguments that start one of its services.
func (s Source) command(service string) []string {
	if s.Layout == LayoutComponent {
		switch service {
		case "version":
			return []string{"/usr/bin/calico", "version"}
		default:
			return []string{"/usr/bin/calico", "component", service}
		}
	}
	if service == "version" {
		return []string{"/bin/calico-node", "-v"}
	}
	return []string{"/bin/calico-node", "-" + service}
}

func executable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}
