package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/birdcage/birdcage/instrument/pcap"
	"github.com/birdcage/birdcage/instrument/probe"
	"github.com/birdcage/birdcage/report/results"
	"github.com/birdcage/birdcage/topo"
)

// Captures are a cluster's packet captures of its probe traffic: armed
// with Arm, started with the cluster's first probe session, ended by Stop.
type Captures struct {
	c       *Cluster
	mu      sync.Mutex
	dir     string // where files go; "" = not armed
	running []*runningCapture
	started bool
}

type runningCapture struct {
	node, iface, path string
	c                 *pcap.Capture
}

var clusterCaptures sync.Map // *Cluster → *Captures

// Captures are the cluster's packet captures.
func (c *Cluster) Captures() *Captures {
	v, _ := clusterCaptures.LoadOrStore(c, &Captures{c: c})
	return v.(*Captures)
}

// Arm arms per-node packet captures: when the cluster's first probe
// session starts, every node's uplinks (and tunl0 on an IPIP node)
// are captured into dir, one file NODE-IFACE.pcap each, keeping only probe
// packets (UDP to or from the probe port, also inside IPIP), until
// Stop. Each capture is an AF_PACKET socket inside the node's
// namespace, with the kernel's receive timestamps.
func (cs *Captures) Arm(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("packet captures: %w", err)
	}
	cs.mu.Lock()
	cs.dir = dir
	cs.mu.Unlock()
	cs.c.Run.DeferLocal("packet captures", func() error {
		_, err := cs.Stop("")
		clusterCaptures.Delete(cs.c)
		return err
	})
	return nil
}

// start starts the armed captures once (at the first probe session).
func (cs *Captures) start(o probe.Options) error {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.dir == "" || cs.started {
		return nil
	}
	cs.started = true
	port := o.Port
	if port == 0 {
		port = probe.DefaultPort
	}
	for _, nd := range cs.c.Net.Nodes {
		var ifs []string
		for _, ifc := range nd.Spec.Interfaces {
			ifs = append(ifs, ifc.Name)
		}
		if nd.Tunnel {
			ifs = append(ifs, topo.TunnelDevice)
		}
		for _, ifn := range ifs {
			path := filepath.Join(cs.dir, nd.Name+"-"+ifn+".pcap")
			pc, err := pcap.Start(pcap.Options{Netns: nd.Path, Iface: ifn, Path: path, Keep: pcap.UDPPort(port)})
			if err != nil {
				return fmt.Errorf("packet capture on %s %s: %w", nd.Name, ifn, err)
			}
			cs.running = append(cs.running, &runningCapture{node: nd.Name, iface: ifn, path: path, c: pc})
		}
	}
	return nil
}

// Stop stops the captures and lists their files, paths relative to
// rel (the artifacts dir; "" leaves them absolute). Safe to call again: it
// lists the same files.
func (cs *Captures) Stop(rel string) ([]results.CaptureFile, error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	var out []results.CaptureFile
	var errs []error
	for _, r := range cs.running {
		st, err := r.c.Stop()
		if err != nil {
			errs = append(errs, err)
		}
		p := r.path
		if rel != "" {
			if q, err := filepath.Rel(rel, r.path); err == nil {
				p = q
			}
		}
		out = append(out, results.CaptureFile{Node: r.node, Iface: r.iface, Path: p, Stats: st})
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("packet captures: %v", errs)
	}
	return out, nil
}
