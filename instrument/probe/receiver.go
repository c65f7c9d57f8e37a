package probe

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"

	"github.com/birdcage/birdcage/bpf"
	"github.com/birdcage/birdcage/internal/monoclock"
	"github.com/containernetworking/plugins/pkg/ns"
)

// receiver is the UDP socket probes are addressed to, inside the destination
// workload's netns. The BPF tracker at the workload's interface is the
// measurement; the receiver keeps the port open (no ICMP port unreachable
// back to the sender) and keeps a user-space count as a cross-check.
type receiver struct {
	ep   Endpoint
	conn *net.UDPConn
	done chan struct{}

	mu    sync.Mutex
	flows map[netip.Addr]*userTrack // by source address
}

// userTrack is the user-space view of one flow at its receiver.
type userTrack struct {
	received     uint64
	highest      uint64
	lastNs       int64
	maxGapNs     int64
	maxLatencyNs int64
	seen         seqBitmap // sequence numbers seen, for Delivery
	distinct     uint64
}

func listen(ep Endpoint, port uint16) (*receiver, error) {
	n, err := ns.GetNS(ep.Netns)
	if err != nil {
		return nil, fmt.Errorf("receiver %s: open netns: %w", ep.Name, err)
	}
	defer n.Close()
	var conn *net.UDPConn
	err = n.Do(func(ns.NetNS) error {
		var err error
		conn, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(ep.Addr, port)))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("receiver %s: listen on %s port %d in %s: %w", ep.Name, ep.Addr, port, ep.Netns, err)
	}
	_ = conn.SetReadBuffer(4 << 20)
	r := &receiver{ep: ep, conn: conn, done: make(chan struct{}), flows: map[netip.Addr]*userTrack{}}
	go r.loop()
	return r, nil
}

func (r *receiver) loop() {
	defer close(r.done)
	buf := make([]byte, 2048)
	for {
		n, from, err := r.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		now := monoclock.Now()
		seq, sent, ok := bpf.ParseProbe(buf[:n])
		if !ok {
			continue
		}
		src := from.Addr().Unmap()
		r.mu.Lock()
		t := r.flows[src]
		if t == nil {
			t = &userTrack{}
			r.flows[src] = t
		}
		if t.received > 0 && now-t.lastNs > t.maxGapNs {
			t.maxGapNs = now - t.lastNs
		}
		t.received++
		if t.seen.set(seq) {
			t.distinct++
		}
		t.lastNs = now
		t.highest = max(t.highest, seq)
		t.maxLatencyNs = max(t.maxLatencyNs, now-sent)
		r.mu.Unlock()
	}
}

func (r *receiver) track(src netip.Addr) userTrack {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t := r.flows[src]; t != nil {
		return *t
	}
	return userTrack{}
}

// seen is a copy of the sequence numbers seen from src and their count.
func (r *receiver) seen(src netip.Addr) (seqBitmap, uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.flows[src]
	if t == nil {
		return nil, 0
	}
	return append(seqBitmap(nil), t.seen...), t.distinct
}

func (r *receiver) close() error {
	err := r.conn.Close()
	<-r.done
	if err != nil {
		return fmt.Errorf("receiver %s: close: %w", r.ep.Name, err)
	}
	return nil
}
