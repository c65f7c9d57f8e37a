package bird

import (
	"context"
	"fmt"

	"github.com/birdcage/birdcage/dataplane/bird/release"
)

// BIRD 1.x runs IPv4 and IPv6 as two daemons, bird and bird6, each with its
// own config and control socket, as Calico's node software does. A 1.x
// node's Instance (daemon bird) drives its bird6 alongside: it is started,
// stopped, configured and waited on together with bird, and RSS is the sum.
// The Client and ConfigPath are bird's (IPv4); Pair gives bird6's.

// Pair is the node's bird6 on 1.x, nil otherwise.
func (b *Instance) Pair() *Instance { return b.pair() }

func (b *Instance) pair() *Instance {
	if b.daemon != "bird" || !b.Release().Name.TwoDaemons() {
		return nil
	}
	return b.six
}

// ensurePair creates the bird6 instance once a bird instance's release has
// two daemons (at New, or at SetRelease to 1.x).
func (b *Instance) ensurePair() error {
	rel := b.Release()
	if b.daemon != "bird" || !rel.Name.TwoDaemons() {
		return nil
	}
	if b.six != nil {
		return b.six.SetRelease(rel)
	}
	o := b.opts
	o.Name, o.Daemon, o.Release = b.name+"-6", "bird6", rel
	six, err := New(b.run, o)
	if err != nil {
		return fmt.Errorf("bird %s: its bird6: %w", b.name, err)
	}
	b.six = six
	return nil
}

func (b *Instance) splitPair(conf []byte) (conf4, conf6 []byte, err error) {
	c4, c6, ok := release.Split(conf)
	if !ok {
		return nil, nil, fmt.Errorf("bird %s: BIRD %s runs bird and bird6: configure it with both configs (confd.Rendered.Daemons()), not one", b.name, b.Release().Name)
	}
	return c4, c6, nil
}

// startDaemons starts bird, then (on 1.x) bird6.
func (b *Instance) startDaemons(ctx context.Context, recovery bool) error {
	if err := b.start(ctx, recovery); err != nil {
		return err
	}
	if six := b.pair(); six != nil {
		return six.start(ctx, recovery)
	}
	return nil
}
