package harness

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/birdcage/birdcage/internal/calico/datastore"
)

// MoveBlock re-assigns an IPAM block to another node in the datastore, as
// IPAM does when a block's affinity moves: the old owner's confd stops
// advertising it, the new owner's starts, and every other node's route to
// the block gets a new next hop. The block must be affine to some node now
// and to must be a node of the cluster.
func (c *Cluster) MoveBlock(ctx context.Context, cidr netip.Prefix, to string) (Event, error) {
	c.Node(to) // panics on a node the topology lacks
	cl, err := c.Store.Read(ctx)
	if err != nil {
		return Event{}, err
	}
	from := ""
	for _, b := range cl.Blocks {
		if p, err := netip.ParsePrefix(b.CIDR); err == nil && p == cidr {
			from = b.Node
		}
	}
	if from == "" {
		return Event{}, fmt.Errorf("move block %s: no node has it in the datastore", cidr)
	}
	e := c.Mark(fmt.Sprintf("MoveBlock(%s %s→%s)", cidr, from, to))
	return e, c.Store.Put(datastore.KindBlockAffinity, blockDocName(cidr), datastore.BlockAffinity{CIDR: cidr.String(), Node: to})
}

// BlockNode is the node a block is affine to in the datastore now ("" when
// none is).
func (c *Cluster) BlockNode(ctx context.Context, cidr netip.Prefix) (string, error) {
	cl, err := c.Store.Read(ctx)
	if err != nil {
		return "", err
	}
	for _, b := range cl.Blocks {
		if p, err := netip.ParsePrefix(b.CIDR); err == nil && p == cidr {
			return b.Node, nil
		}
	}
	return "", nil
}
