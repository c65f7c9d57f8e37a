//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR MIT)
//
// birdcage's emulated IPIP tunnel, for kernels without the ipip module.
//
// A node's tunl0 is then a NOARP veth. tunnel_encap runs at the TC ingress
// of its peer, so everything a real tunl0 shows of a packet it sends (packet
// sockets, the qdisc, counters at its egress) the emulated one shows too:
// every IPv4 packet the node routed via tunl0 is wrapped in an outer IPv4
// header toward the route's next hop (the onlink gateway the programmer or
// BIRD wrote), and sent out of the underlay device that reaches that gateway.
// tunnel_decap runs at the TC ingress of the node's underlay devices: an
// IPv4 packet of protocol 4 addressed to the node loses its outer header and
// is handed to tunl0's ingress, where the stack forwards the inner packet as
// it would one the kernel's fallback tunnel decapsulated.
//
// What the kernel's fallback tunnel does, and this does too (ip_tunnel_xmit,
// ipip_rcv, ip_tunnel_rcv in net/ipv4; its parameters are all zero):
//   - outer destination: the gateway of the route the inner packet took, or
//     the inner destination where that route has none (NBMA tunnel);
//   - outer source: the one the kernel picks for the route to that
//     destination (the fallback tunnel has no local address);
//   - TTL 0 = inherit: the outer TTL is the inner one (already decremented
//     when the node forwarded it);
//   - TOS 0: DSCP 0; ECN copied from the inner header, CE sent as ECT(0);
//   - DF copied from the inner header (pmtudisc is off on the fallback
//     device, so only the inner DF sets it);
//   - a packet whose route via tunl0 leads back to tunl0 is dropped;
//   - decap: ECN CE on the outer header marks an ECT inner packet CE and
//     drops a Not-ECT one (RFC 6040), the inner TTL is left alone.
// tunl0's MTU (underlay minus 20) is the device's, so the stack's own
// fragmentation and ICMP frag-needed apply before the program sees a packet.
//
// What it does not do: reassemble outer fragments (they are left to the
// stack, which has no ipip handler), or act on ICMP errors about the outer
// packet (the kernel lowers the tunnel's PMTU on them).

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#define AF_INET 2
#define IP_DF 0x4000
#define IP_MF 0x2000
#define IP_OFFSET 0x1fff
#define ECN_MASK 3
#define ECN_NOT_ECT 0
#define ECN_ECT0 2
#define ECN_CE 3
#ifndef BPF_F_ADJ_ROOM_DECAP_L3_IPV4
#define BPF_F_ADJ_ROOM_DECAP_L3_IPV4 (1ULL << 7) /* kernel 6.3; older uapi headers lack it */
#endif

/* Set by the loader before the program is loaded. */
struct tunnel_config {
	__u32 tunl_ifindex; /* the emulated tunl0 in this namespace */
	__u8 tunl_mac[6];   /* its MAC: decapsulated frames are addressed to it */
	__u8 no_encap;      /* negative control: send the inner packet as is */
	__u8 pad;
};

volatile const struct tunnel_config cfg = {};

/* What the programs did, per CPU; the indexes are the STAT_ values. */
enum {
	STAT_ENCAP,         /* encapsulated and redirected */
	STAT_DECAP,         /* decapsulated and handed to tunl0 */
	STAT_NOT_IPV4,      /* dropped at tunl0: not IPv4 */
	STAT_NO_ROUTE,      /* dropped at tunl0: no route via tunl0 */
	STAT_NO_UNDERLAY,   /* dropped at tunl0: the gateway is unreachable */
	STAT_LOOP,          /* dropped at tunl0: the gateway is routed via tunl0 */
	STAT_ERROR,         /* dropped: a helper failed */
	STAT_ECN_DROP,      /* dropped at decap: CE outer, Not-ECT inner */
	STAT_PLAIN,         /* sent un-encapsulated (no_encap) */
	STAT_BAD_INNER,     /* dropped at decap: the inner packet is not IPv4 */
	STAT_MAX,
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} tunnel_stats SEC(".maps");

static __always_inline void count(__u32 what)
{
	__u64 *v = bpf_map_lookup_elem(&tunnel_stats, &what);
	if (v)
		*v += 1;
}

static __always_inline int drop(__u32 why)
{
	count(why);
	return TC_ACT_SHOT;
}

static __always_inline __u16 ip_checksum(struct iphdr *ip)
{
	__u16 *p = (__u16 *)ip;
	__u32 sum = 0;
#pragma unroll
	for (int i = 0; i < (int)(sizeof(*ip) / 2); i++)
		sum += p[i];
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)~sum;
}

/* The outer TOS of the fallback tunnel: DSCP 0, the inner ECN with CE sent
 * as ECT(0) (INET_ECN_encapsulate). */
static __always_inline __u8 outer_tos(__u8 inner)
{
	__u8 ecn = inner & ECN_MASK;
	return ecn == ECN_CE ? ECN_ECT0 : ecn;
}

SEC("tc")
int tunnel_encap(struct __sk_buff *skb)
{
	if (skb->protocol != bpf_htons(ETH_P_IP))
		return drop(STAT_NOT_IPV4);
	struct iphdr in;
	if (bpf_skb_load_bytes(skb, ETH_HLEN, &in, sizeof(in)) < 0 || in.version != 4 || in.ihl < 5)
		return drop(STAT_NOT_IPV4);

	/* The route the stack sent the packet by, restricted to tunl0 (the
	 * output lookup's oif): its next hop is the tunnel's far end. */
	struct bpf_fib_lookup fib = {
		.family = AF_INET,
		.l4_protocol = in.protocol,
		.tos = in.tos,
		.ipv4_src = in.saddr,
		.ipv4_dst = in.daddr,
		.ifindex = cfg.tunl_ifindex,
	};
	long rc = bpf_fib_lookup(skb, &fib, sizeof(fib), BPF_FIB_LOOKUP_OUTPUT | BPF_FIB_LOOKUP_SKIP_NEIGH);
	if ((rc != BPF_FIB_LKUP_RET_SUCCESS && rc != BPF_FIB_LKUP_RET_FRAG_NEEDED) || fib.ifindex != cfg.tunl_ifindex)
		return drop(STAT_NO_ROUTE);
	__be32 remote = fib.ipv4_dst;

	/* The route to the far end, as a packet from tunl0 would take it; the
	 * source is the one the kernel picks for it. */
	struct bpf_fib_lookup under = {
		.family = AF_INET,
		.l4_protocol = IPPROTO_IPIP,
		.ipv4_dst = remote,
		.ifindex = cfg.tunl_ifindex,
	};
	rc = bpf_fib_lookup(skb, &under, sizeof(under), BPF_FIB_LOOKUP_SKIP_NEIGH | BPF_FIB_LOOKUP_SRC);
	if (rc != BPF_FIB_LKUP_RET_SUCCESS && rc != BPF_FIB_LKUP_RET_FRAG_NEEDED)
		return drop(STAT_NO_UNDERLAY);
	if (under.ifindex == cfg.tunl_ifindex)
		return drop(STAT_LOOP);
	struct bpf_redir_neigh nh = {.nh_family = AF_INET, .ipv4_nh = under.ipv4_dst};

	if (cfg.no_encap) {
		count(STAT_PLAIN);
		return bpf_redirect_neigh(under.ifindex, &nh, sizeof(nh), 0);
	}

	struct iphdr out = {
		.version = 4,
		.ihl = 5,
		.tos = outer_tos(in.tos),
		.tot_len = bpf_htons(bpf_ntohs(in.tot_len) + sizeof(out)),
		.id = bpf_htons((__u16)bpf_get_prandom_u32()),
		.frag_off = in.frag_off & bpf_htons(IP_DF),
		.ttl = in.ttl,
		.protocol = IPPROTO_IPIP,
		.saddr = under.ipv4_src,
		.daddr = remote,
	};
	out.check = ip_checksum(&out);
	if (bpf_skb_adjust_room(skb, sizeof(out), BPF_ADJ_ROOM_MAC, BPF_F_ADJ_ROOM_ENCAP_L3_IPV4) < 0)
		return drop(STAT_ERROR);
	if (bpf_skb_store_bytes(skb, ETH_HLEN, &out, sizeof(out), 0) < 0)
		return drop(STAT_ERROR);
	count(STAT_ENCAP);
	return bpf_redirect_neigh(under.ifindex, &nh, sizeof(nh), 0);
}

SEC("tc")
int tunnel_decap(struct __sk_buff *skb)
{
	if (skb->protocol != bpf_htons(ETH_P_IP))
		return TC_ACT_UNSPEC;
	struct iphdr out;
	if (bpf_skb_load_bytes(skb, ETH_HLEN, &out, sizeof(out)) < 0)
		return TC_ACT_UNSPEC;
	if (out.version != 4 || out.ihl < 5 || out.protocol != IPPROTO_IPIP)
		return TC_ACT_UNSPEC;
	if (out.frag_off & bpf_htons(IP_MF | IP_OFFSET))
		return TC_ACT_UNSPEC;
	/* Limited broadcast and multicast are never the tunnel's. */
	__u32 daddr = bpf_ntohl(out.daddr);
	if (daddr == 0xffffffff || (daddr >> 28) == 0xe)
		return TC_ACT_UNSPEC;

	/* Addressed to the node: the stack would deliver it locally, not
	 * forward it. (A destination with no route at all is decapsulated too,
	 * where the kernel would drop it; the inner packet then needs a route
	 * of its own.) */
	struct bpf_fib_lookup fib = {
		.family = AF_INET,
		.l4_protocol = IPPROTO_IPIP,
		.ipv4_src = out.saddr,
		.ipv4_dst = out.daddr,
		.ifindex = skb->ingress_ifindex,
	};
	long rc = bpf_fib_lookup(skb, &fib, sizeof(fib), BPF_FIB_LOOKUP_SKIP_NEIGH);
	if (rc != BPF_FIB_LKUP_RET_NOT_FWDED)
		return TC_ACT_UNSPEC;

	__u32 hlen = out.ihl * 4;
	struct iphdr in;
	if (bpf_skb_load_bytes(skb, ETH_HLEN + hlen, &in, sizeof(in)) < 0 || in.version != 4 || in.ihl < 5)
		return drop(STAT_BAD_INNER);

	/* ECN (ip_tunnel_rcv's INET_ECN_decapsulate). */
	__u8 tos = in.tos;
	if ((out.tos & ECN_MASK) == ECN_CE) {
		if ((in.tos & ECN_MASK) == ECN_NOT_ECT)
			return drop(STAT_ECN_DROP);
		tos = in.tos | ECN_CE;
	}

	if (bpf_skb_adjust_room(skb, -(__s32)hlen, BPF_ADJ_ROOM_MAC, BPF_F_ADJ_ROOM_DECAP_L3_IPV4) < 0)
		return drop(STAT_ERROR);
	if (tos != in.tos) {
		__u16 old = bpf_htons(((__u16)in.version << 12) | ((__u16)in.ihl << 8) | in.tos);
		__u16 new = bpf_htons(((__u16)in.version << 12) | ((__u16)in.ihl << 8) | tos);
		if (bpf_l3_csum_replace(skb, ETH_HLEN + offsetof(struct iphdr, check), old, new, 2) < 0 ||
		    bpf_skb_store_bytes(skb, ETH_HLEN + offsetof(struct iphdr, tos), &tos, 1, 0) < 0)
			return drop(STAT_ERROR);
	}
	/* Addressed to tunl0, so the stack takes it as its own (PACKET_HOST). */
	/* Byte by byte: volatile reads, which the compiler cannot fold into
	 * the zeros the object is initialised with. */
	__u8 mac[6];
#pragma unroll
	for (int i = 0; i < 6; i++)
		mac[i] = cfg.tunl_mac[i];
	if (bpf_skb_store_bytes(skb, 0, mac, sizeof(mac), 0) < 0)
		return drop(STAT_ERROR);
	count(STAT_DECAP);
	return bpf_redirect(cfg.tunl_ifindex, BPF_F_INGRESS);
}

char __license[] SEC("license") = "Dual MIT/GPL";
