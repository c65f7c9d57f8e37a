// Package pcap records the packets one interface inside a network
// namespace sees (both directions) into a pcap file, from an AF_PACKET
// socket opened in that namespace and bound to the interface, with the
// kernel's receive timestamps (nanoseconds). A filter keeps only the
// packets a reader wants (the probes). Files are written with
// gopacket/pcapgo and open in tcpdump and Wireshark.
//
// It must not know what the traffic means beyond the filter it is given,
// nor where files go (its caller names them).
package pcap
