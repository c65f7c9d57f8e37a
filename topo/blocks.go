package topo

import (
	"fmt"
	"math/big"
	"net/netip"
)

// Block is one IPAM block and the pool it belongs to.
type Block struct {
	CIDR netip.Prefix
	Pool Pool
}

// allocateBlocks returns every node's blocks: the ones it names, and for a
// node that names none, the next free block of each pool in node order. It
// rejects blocks outside every pool, of the wrong size, and overlapping.
func (t *Topology) allocateBlocks() (map[string][]Block, error) {
	type used struct {
		pfx  netip.Prefix
		node string
	}
	var taken []used
	overlap := func(p netip.Prefix) (string, bool) {
		for _, u := range taken {
			if u.pfx.Overlaps(p) {
				return u.node, true
			}
		}
		return "", false
	}
	out := map[string][]Block{}
	for _, n := range t.Nodes {
		for _, s := range n.Blocks {
			pfx, err := netip.ParsePrefix(s)
			if err != nil || pfx != pfx.Masked() {
				return nil, t.errorf("node %q: field blocks: %q is not a network CIDR like 10.244.1.0/26", n.Name, s)
			}
			pool, ok := t.poolFor(pfx)
			if !ok {
				return nil, t.errorf("node %q: field blocks: %s is outside every pool (%s)", n.Name, s, t.poolList())
			}
			pp := netip.MustParsePrefix(pool.CIDR)
			if pfx.Bits() != pool.blockSize(pp) {
				return nil, t.errorf("node %q: field blocks: %s is a /%d; pool %q has /%d blocks", n.Name, s, pfx.Bits(), pool.Name, pool.blockSize(pp))
			}
			if other, clash := overlap(pfx); clash {
				return nil, t.errorf("node %q: field blocks: %s overlaps a block of node %q", n.Name, s, other)
			}
			taken = append(taken, used{pfx, n.Name})
			out[n.Name] = append(out[n.Name], Block{CIDR: pfx, Pool: pool})
		}
	}
	next := map[string]netip.Prefix{} // pool -> next candidate
	for _, n := range t.Nodes {
		if len(n.Blocks) > 0 {
			continue
		}
		for _, pool := range t.Pools {
			pp := netip.MustParsePrefix(pool.CIDR)
			cand, ok := next[pool.Name]
			if !ok {
				cand = netip.PrefixFrom(pp.Addr(), pool.blockSize(pp))
			}
			for {
				if !pp.Contains(cand.Addr()) {
					return nil, t.errorf("pool %q: %s has no free /%d block left for node %q", pool.Name, pool.CIDR, pool.blockSize(pp), n.Name)
				}
				if _, clash := overlap(cand); !clash {
					break
				}
				cand = nextPrefix(cand)
			}
			taken = append(taken, used{cand, n.Name})
			out[n.Name] = append(out[n.Name], Block{CIDR: cand, Pool: pool})
			next[pool.Name] = nextPrefix(cand)
		}
	}
	return out, nil
}

func (t *Topology) poolFor(p netip.Prefix) (Pool, bool) {
	for _, pool := range t.Pools {
		pp, err := netip.ParsePrefix(pool.CIDR)
		if err == nil && pp.Bits() <= p.Bits() && pp.Contains(p.Addr()) {
			return pool, true
		}
	}
	return Pool{}, false
}

func (t *Topology) poolList() string {
	s := ""
	for i, p := range t.Pools {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s %s", p.Name, p.CIDR)
	}
	return s
}

// nextPrefix returns the prefix of the same length right after p.
func nextPrefix(p netip.Prefix) netip.Prefix {
	return netip.PrefixFrom(addOffset(p.Addr(), 1<<(p.Addr().BitLen()-p.Bits())), p.Bits())
}

// addOffset returns a + n, wrapping silently (callers check containment).
func addOffset(a netip.Addr, n uint64) netip.Addr {
	b := a.AsSlice()
	v := new(big.Int).SetBytes(b)
	v.Add(v, new(big.Int).SetUint64(n))
	out := v.FillBytes(make([]byte, len(b)+1))[1:]
	r, _ := netip.AddrFromSlice(out)
	if a.Is4() {
		return r.Unmap()
	}
	return r
}
