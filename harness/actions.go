package harness

// The actions a scenario, the CLI (harness/control) and a lab perform on a
// cluster. Every one has the same shape:
//
//	func (c *Cluster) Verb(ctx, what..., [VerbOptions]) (results.Event, error)
//
// It marks its own event on the run's clock before it acts (so the event
// is the instant the change began, and a probe gap can be placed against
// it), returns that event with the error, and changes the cluster only the
// way the real system would be changed (a pod replaced, a datastore write
// that confd and the programmers react to, a signal).

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"syscall"
	"time"

	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/calico/datastore"
	"github.com/birdcage/birdcage/internal/monoclock"
	"github.com/birdcage/birdcage/internal/poll"
	"github.com/birdcage/birdcage/report/results"
)

// UpgradeOptions say how a node is replaced.
type UpgradeOptions struct {
	// Signal the old BIRD gets: SIGKILL (default; what a pod deletion does
	// to BIRD in the real node container) or SIGTERM (BIRD sends Cease, so
	// peers withdraw its routes at once).
	Signal syscall.Signal
	// BIRD, when set, replaces BIRD's release too (a BIRD upgrade, e.g.
	// "2.0" to "3.1"); empty keeps the node's release.
	BIRD string
	// Programmer, when set, is the path of the programmer binary the node
	// runs from the upgrade on — a team's own new build under the process
	// contract (dataplane/programmer), so one run gates old build → new
	// build; empty keeps the node's binary.
	Programmer string
	// Calico, on a calico node, is the directory of the image the node's
	// new pod runs (a Calico upgrade: 3.32's build to 3.33's); empty
	// restarts the pod from the image it runs. The release the node is
	// recorded on is the one the new binaries report, not to.
	Calico string
}

// UpgradeNode replaces a node's programmer and BIRD with those of release
// to, the way a pod replacement does: the old BIRD exits (persist leaves its
// routes), the old programmer stops, the new programmer starts, and — if BGP
// is enabled — the new BIRD starts with -R (graceful-restart recovery). It
// returns when the new programmer has synced.
func (c *Cluster) UpgradeNode(ctx context.Context, name string, to config.Release, o UpgradeOptions) (results.Event, error) {
	n := c.Node(name)
	if o.Signal == 0 {
		o.Signal = syscall.SIGKILL
	}
	if r, err := config.ParseRelease(string(to)); err == nil {
		to = r // an alias is recorded as the release it names
	}
	if o.Programmer != "" {
		if err := CheckExecutable(o.Programmer); err != nil {
			return results.Event{}, fmt.Errorf("upgrade %s: field Programmer: %w", name, err)
		}
	}
	if n.Calico != nil {
		return c.upgradeCalico(ctx, n, to, o)
	}
	if o.Calico != "" {
		return results.Event{}, fmt.Errorf("upgrade %s: field Calico: %s runs the model flavour; only a calico node's pod takes a Calico image", name, name)
	}
	e := c.Mark(fmt.Sprintf("UpgradeNode(%s→%s)", name, to))
	fail := func(err error) (results.Event, error) { return e, fmt.Errorf("upgrade %s: %w", name, err) }
	if n.BIRD.Running() {
		if err := n.BIRD.Stop(ctx, o.Signal); err != nil {
			return fail(fmt.Errorf("stop BIRD: %w", err))
		}
	}
	c.Mark(fmt.Sprintf("BIRD(%s) exited", name))
	if o.BIRD != "" {
		if err := c.upgradeBIRD(n, o.BIRD); err != nil {
			return fail(err)
		}
	}
	if err := n.Programmer.Stop(ctx); err != nil {
		return fail(err)
	}
	if o.Programmer != "" {
		if err := n.Programmer.SetBinary(o.Programmer); err != nil {
			return fail(err)
		}
		c.Mark(fmt.Sprintf("programmer(%s) binary %s (sha256 %s)", name, o.Programmer, binaryDigest(o.Programmer)))
	}
	n.mu.Lock()
	n.release = to
	n.mu.Unlock()
	started := monoclock.Now()
	if err := n.Programmer.Start(to); err != nil {
		return fail(err)
	}
	cl, err := c.Store.Read(ctx)
	if err != nil {
		return fail(err)
	}
	if cl.BGP.Enabled() {
		if err := c.confd.writeConfig(n, cl); err != nil {
			return fail(err)
		}
		if c.confd.birdRuns(n) {
			if err := n.BIRD.StartRecovery(ctx); err != nil {
				return fail(fmt.Errorf("start BIRD -R: %w", err))
			}
		}
	}
	if err := poll.Until(ctx, 5*time.Millisecond, func() bool { return n.Programmer.Synced(started) }); err != nil {
		return fail(fmt.Errorf("new programmer did not sync (log %s): %w", n.Programmer.LogPath(), err))
	}
	c.Mark(fmt.Sprintf("UpgradeNode(%s) programmer synced", name))
	return e, nil
}

// KillBIRD stops a node's BIRD with sig and does not bring it back.
func (c *Cluster) KillBIRD(ctx context.Context, name string, sig syscall.Signal) (results.Event, error) {
	n := c.Node(name)
	if n.Calico != nil {
		return results.Event{}, errCalicoNode(name, "KillBIRD")
	}
	e := c.Mark(fmt.Sprintf("KillBIRD(%s,%s)", name, sig))
	return e, n.BIRD.Stop(ctx, sig)
}

// StartBIRDOptions say how a BIRD is started.
type StartBIRDOptions struct {
	// Recovery starts it with -R: graceful-restart recovery, as the node
	// container does after BIRD itself restarted.
	Recovery bool
}

// StartBIRD starts a node's BIRD from a fresh render.
func (c *Cluster) StartBIRD(ctx context.Context, name string, o StartBIRDOptions) (results.Event, error) {
	n := c.Node(name)
	if n.Calico != nil {
		return results.Event{}, errCalicoNode(name, "StartBIRD")
	}
	e := c.Mark(fmt.Sprintf("StartBIRD(%s)", name))
	cl, err := c.Store.Read(ctx)
	if err != nil {
		return e, err
	}
	if err := c.confd.writeConfig(n, cl); err != nil {
		return e, err
	}
	if o.Recovery {
		return e, n.BIRD.StartRecovery(ctx)
	}
	return e, n.BIRD.Start(ctx)
}

// SetProgramClusterRoutes sets FelixConfiguration.programClusterRoutes and
// BGPConfiguration.programClusterRoutes together, as an operator does:
// confd re-renders and reconfigures BIRD, and every programmer whose
// ownership changed exits and is restarted. Empty leaves a field unset.
func (c *Cluster) SetProgramClusterRoutes(ctx context.Context, felix, bgp config.ProgramClusterRoutes) (results.Event, error) {
	cl, err := c.Store.Read(ctx)
	if err != nil {
		return results.Event{}, err
	}
	f, b := cl.Felix, cl.BGP
	f.ProgramClusterRoutes, b.ProgramClusterRoutes = string(felix), string(bgp)
	e := c.Mark(fmt.Sprintf("SetProgramClusterRoutes(Felix=%s, BGP=%s)", orUnset(felix), orUnset(bgp)))
	if err := c.Store.Put(datastore.KindBGPConfiguration, datastore.SingletonName, b); err != nil {
		return e, err
	}
	return e, c.Store.Put(datastore.KindFelixConfiguration, datastore.SingletonName, f)
}

func orUnset(v config.ProgramClusterRoutes) string {
	if v == "" {
		return "unset"
	}
	return string(v)
}

// RemoveNode stops a node's programmer and BIRD and deletes the node, its
// blocks, workloads and peerings from the datastore (the node has left).
func (c *Cluster) RemoveNode(ctx context.Context, name string) (results.Event, error) {
	n := c.Node(name)
	if n.Calico != nil {
		return results.Event{}, errCalicoNode(name, "RemoveNode")
	}
	e := c.Mark("RemoveNode(" + name + ")")
	var errs []error
	if n.BIRD.Running() {
		errs = append(errs, n.BIRD.Stop(ctx, syscall.SIGKILL))
	}
	errs = append(errs, n.Programmer.Kill(ctx))
	cl, err := c.Store.Read(ctx)
	if err != nil {
		return e, err
	}
	for _, b := range cl.Blocks {
		if b.Node == name {
			p, _ := netip.ParsePrefix(b.CIDR)
			errs = append(errs, c.Store.Delete(datastore.KindBlockAffinity, blockDocName(p)))
		}
	}
	for _, w := range cl.Workloads {
		if w.Node == name {
			errs = append(errs, c.Store.Delete(datastore.KindWorkload, w.Name))
		}
	}
	for _, p := range cl.Peers {
		if p.Node == name {
			errs = append(errs, c.Store.Delete(datastore.KindBGPPeer, p.Name))
		}
	}
	errs = append(errs, c.Store.Delete(datastore.KindNode, name))
	return e, errors.Join(errs...)
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// CheckExecutable says why path cannot be a programmer binary, if it
// cannot (missing, a directory, not executable).
func CheckExecutable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("programmer binary %q: %w", path, err)
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("programmer binary %q: not an executable file", path)
	}
	return nil
}
