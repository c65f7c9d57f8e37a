package pcap

import (
	"encoding/binary"
	"testing"

	"github.com/google/gopacket/layers"
)

func ipv4(proto byte, payload []byte) []byte {
	b := make([]byte, 20, 20+len(payload))
	b[0], b[9] = 0x45, proto
	return append(b, payload...)
}

func udp(src, dst uint16) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint16(b[0:], src)
	binary.BigEndian.PutUint16(b[2:], dst)
	return b
}

func eth(et uint16, payload []byte) []byte {
	b := make([]byte, 14, 14+len(payload))
	binary.BigEndian.PutUint16(b[12:], et)
	return append(b, payload...)
}

func TestUDPPort(t *testing.T) {
	keep := UDPPort(47000)
	frag := ipv4(17, udp(1, 47000))
	binary.BigEndian.PutUint16(frag[6:], 5) // a later fragment
	v6 := make([]byte, 40)
	v6[0], v6[6] = 0x60, 17
	for _, tc := range []struct {
		name string
		link layers.LinkType
		b    []byte
		want bool
	}{
		{"udp to the port", layers.LinkTypeEthernet, eth(0x0800, ipv4(17, udp(33000, 47000))), true},
		{"udp from the port (reply direction)", layers.LinkTypeEthernet, eth(0x0800, ipv4(17, udp(47000, 33000))), true},
		{"other udp", layers.LinkTypeEthernet, eth(0x0800, ipv4(17, udp(179, 5353))), false},
		{"tcp (BGP)", layers.LinkTypeEthernet, eth(0x0800, ipv4(6, udp(179, 47000))), false},
		{"arp", layers.LinkTypeEthernet, eth(0x0806, make([]byte, 28)), false},
		{"ipip on an uplink", layers.LinkTypeEthernet, eth(0x0800, ipv4(4, ipv4(17, udp(1, 47000)))), true},
		{"ipip, other inner", layers.LinkTypeEthernet, eth(0x0800, ipv4(4, ipv4(17, udp(1, 2)))), false},
		{"raw ip on tunl0", layers.LinkTypeRaw, ipv4(17, udp(1, 47000)), true},
		{"vlan", layers.LinkTypeEthernet, append(eth(0x8100, []byte{0, 1, 0x08, 0}), ipv4(17, udp(1, 47000))...), true},
		{"ipv6", layers.LinkTypeEthernet, eth(0x86dd, append(v6, udp(1, 47000)...)), true},
		{"later fragment", layers.LinkTypeEthernet, eth(0x0800, frag), false},
		{"truncated", layers.LinkTypeEthernet, eth(0x0800, []byte{0x45, 0}), false},
	} {
		if got := keep(tc.link, tc.b); got != tc.want {
			t.Errorf("%s: kept %v, want %v", tc.name, got, tc.want)
		}
	}
}
