package pcap

import (
	"encoding/binary"

	"github.com/google/gopacket/layers"
)

// UDPPort keeps UDP packets from or to port, also inside an IPIP tunnel
// (an IPv4 packet carrying IPv4, as on an IPIP node's uplink), over IPv4
// or IPv6, behind at most one VLAN tag.
func UDPPort(port uint16) Filter {
	return func(link layers.LinkType, b []byte) bool {
		if link == layers.LinkTypeEthernet {
			if len(b) < 14 {
				return false
			}
			et, off := binary.BigEndian.Uint16(b[12:14]), 14
			if et == 0x8100 && len(b) >= 18 {
				et, off = binary.BigEndian.Uint16(b[16:18]), 18
			}
			switch et {
			case 0x0800, 0x86dd:
				b = b[off:]
			default:
				return false
			}
		}
		return ipUDPPort(b, port, 2)
	}
}

// ipUDPPort looks into an IP packet (depth bounds IPIP nesting).
func ipUDPPort(b []byte, port uint16, depth int) bool {
	if len(b) < 1 || depth == 0 {
		return false
	}
	var proto byte
	var l4 []byte
	switch b[0] >> 4 {
	case 4:
		ihl := int(b[0]&0x0f) * 4
		if ihl < 20 || len(b) < ihl {
			return false
		}
		// A fragment after the first carries no UDP header.
		if binary.BigEndian.Uint16(b[6:8])&0x1fff != 0 {
			return false
		}
		proto, l4 = b[9], b[ihl:]
	case 6:
		if len(b) < 40 {
			return false
		}
		proto, l4 = b[6], b[40:]
	default:
		return false
	}
	switch proto {
	case 4: // IPIP
		return ipUDPPort(l4, port, depth-1)
	case 17:
		if len(l4) < 4 {
			return false
		}
		return binary.BigEndian.Uint16(l4[0:2]) == port || binary.BigEndian.Uint16(l4[2:4]) == port
	}
	return false
}
