package bird

import specs "github.com/opencontainers/runtime-spec/specs-go"

// releaseMounts adapts the mounts of a host-BIRD container to a release
// rootfs: the rootfs carries its own /usr (and, for bookworm packages, its
// own /lib) and /etc, so the host's /usr and /etc are not bound; every
// other mount (proc, dev, sys, the node's /etc/bird, /run, /run/bird,
// /tmp) and the capabilities stay as they are.
func releaseMounts(ms []specs.Mount) []specs.Mount {
	out := ms[:0:0]
	for _, m := range ms {
		if m.Type == "bind" && (m.Source == "/usr" || m.Source == "/etc") {
			continue
		}
		out = append(out, m)
	}
	return out
}
