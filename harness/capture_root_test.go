package harness

// Packet captures of the probe window hold exactly the probes that crossed
// each node interface: on a real cluster, with captures armed, every
// capture file's packet count equals what the BPF hop counters at that
// interface (both directions, plain and inside IPIP) counted for the
// session's flows, the file reads back as pcap with the link type of its
// device, and nothing was dropped. The counters are the control: they see
// the same packets by another path (TC programs, not a packet socket), and
// they saw traffic (a guard against two zeros agreeing).

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/birdcage/birdcage/topo"
)

func TestPacketCapturesMatchHopCounters(t *testing.T) {
	for _, name := range []string{"noencap", "ipip"} {
		t.Run(name, func(t *testing.T) {
			c := startOrSkip(t, name, Options{})
			dir := t.TempDir()
			if err := c.Captures().Arm(filepath.Join(dir, "pcap")); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			rep := probeUntil(ctx, t, c, 200)
			files, err := c.Captures().Stop(dir)
			if err != nil {
				t.Fatal(err)
			}
			counted := map[string]uint64{} // "node/iface" → packets both ways
			for _, f := range rep.Flows {
				for _, h := range f.Hops {
					at := strings.TrimSuffix(strings.TrimSuffix(h.Hop, " egress"), " ingress")
					counted[at] += h.Packets + h.Inner
				}
			}
			want := 0
			for _, n := range c.Net.Nodes {
				want += len(n.Spec.Interfaces)
				if n.Tunnel {
					want++
				}
			}
			if len(files) != want || want == 0 {
				t.Fatalf("%d capture files, want one per node interface (%d)", len(files), want)
			}
			var total int64
			for _, f := range files {
				at := f.Node + "/" + f.Iface
				t.Logf("%-14s %6d packets in %s (kernel drops %d), counters %d", at, f.Packets, f.Path, f.KernelDrops, counted[at])
				total += f.Packets
				if f.KernelDrops != 0 || f.OverLimit != 0 {
					t.Errorf("%s: capture missed packets: %+v", at, f.Stats)
				}
				if uint64(f.Packets) != counted[at] {
					t.Errorf("%s: capture holds %d probe packets, the hop counters counted %d", at, f.Packets, counted[at])
				}
				if strings.HasPrefix(f.Path, "/") || !strings.HasSuffix(f.Path, f.Node+"-"+f.Iface+".pcap") {
					t.Errorf("%s: path %q should be relative and name node and interface", at, f.Path)
				}
				fh, err := os.Open(filepath.Join(dir, f.Path))
				if err != nil {
					t.Fatal(err)
				}
				rd, err := pcapgo.NewReader(fh)
				if err != nil {
					t.Fatalf("%s: not a pcap file: %v", at, err)
				}
				wantLink := layers.LinkTypeEthernet
				if f.Iface == "tunl0" && c.Net.Tunnel == topo.TunnelKernel { // the emulation's is a veth
					wantLink = layers.LinkTypeRaw
				}
				if rd.LinkType() != wantLink {
					t.Errorf("%s: link type %v, want %v", at, rd.LinkType(), wantLink)
				}
				n := int64(0)
				for {
					if _, _, err := rd.ReadPacketData(); err != nil {
						break
					}
					n++
				}
				fh.Close()
				if n != f.Packets {
					t.Errorf("%s: read back %d packets, stats say %d", at, n, f.Packets)
				}
			}
			if total == 0 {
				t.Fatalf("guard: the captures hold no packet at all")
			}
		})
	}
}
