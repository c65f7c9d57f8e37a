// Package nsutil creates, enters and deletes named network namespaces without
// ever leaving the calling goroutine's OS thread in the wrong namespace.
//
// Named namespaces live under /var/run/netns like `ip netns add` makes them, so
// `ip netns exec`, runc (joining by path) and `birdcage clean` all see them.
//
// It also owns reading a namespace's tables: Dump (and Links, Routes, Addrs)
// retries a netlink dump the kernel flagged as interrupted by a concurrent
// change, so no caller takes a partial table for the truth.
package nsutil

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Dir is where named network namespaces are bind-mounted.
const Dir = "/var/run/netns"

// Path returns the bind-mount path of a named namespace.
func Path(name string) string { return filepath.Join(Dir, name) }

// Create makes a new named network namespace and brings its loopback up. The
// calling thread is returned to its original namespace before Create returns;
// the thread that did the switch is locked for the duration and never reused
// in the wrong namespace.
func Create(name string) (ns.NetNS, error) {
	if len(name) > 200 {
		return nil, fmt.Errorf("netns name %q: too long", name)
	}
	errc := make(chan error, 1)
	go func() {
		// A fresh goroutine on a locked thread: if anything below fails
		// half-way, the thread is left locked and dies with the goroutine
		// instead of being returned to the scheduler in the wrong netns.
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- fmt.Errorf("get current netns: %w", err)
			return
		}
		defer orig.Close()
		h, err := netns.NewNamed(name)
		if err != nil {
			errc <- fmt.Errorf("create netns %s: %w", name, err)
			return
		}
		h.Close()
		if err := netns.Set(orig); err != nil {
			errc <- fmt.Errorf("return from netns %s: %w", name, err)
			return
		}
		runtime.UnlockOSThread()
		errc <- nil
	}()
	if err := <-errc; err != nil {
		return nil, err
	}
	n, err := ns.GetNS(Path(name))
	if err != nil {
		_ = Delete(name)
		return nil, fmt.Errorf("open netns %s: %w", name, err)
	}
	if err := LinkUpLoopback(n); err != nil {
		n.Close()
		_ = Delete(name)
		return nil, err
	}
	return n, nil
}

// LinkUpLoopback brings "lo" up inside n.
func LinkUpLoopback(n ns.NetNS) error {
	h, err := Handle(n)
	if err != nil {
		return err
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("netns %s: lo: %w", n.Path(), err)
	}
	if err := h.LinkSetUp(lo); err != nil {
		return fmt.Errorf("netns %s: lo up: %w", n.Path(), err)
	}
	return nil
}

// Handle opens a netlink handle bound to n; the handle works from any thread.
func Handle(n ns.NetNS) (*netlink.Handle, error) {
	h, err := netlink.NewHandleAt(netns.NsHandle(n.Fd()), unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("netlink handle in %s: %w", n.Path(), err)
	}
	return h, nil
}

// Delete unmounts and removes a named namespace. Processes still inside keep
// it alive until they exit; a missing namespace is not an error.
func Delete(name string) error {
	p := Path(name)
	if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount netns %s: %w", name, err)
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove netns %s: %w", name, err)
	}
	return nil
}

// List returns the names of all named namespaces.
func List() ([]string, error) {
	ents, err := os.ReadDir(Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names, nil
}

// SetSysctls writes sysctls inside n, e.g. "net/ipv4/ip_forward": "1".
// /proc/sys/net reflects the netns of the thread that opens it, so all are
// written from one locked thread inside n.
func SetSysctls(n ns.NetNS, kv map[string]string) error {
	return n.Do(func(ns.NetNS) error {
		for k, v := range kv {
			if err := os.WriteFile(filepath.Join("/proc/sys", k), []byte(v), 0o644); err != nil {
				return fmt.Errorf("sysctl %s=%s in %s: %w", k, v, n.Path(), err)
			}
		}
		return nil
	})
}
