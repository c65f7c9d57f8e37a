//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR MIT)
//
// birdcage's TC counter: attached at one interface and direction, it counts
// every IPv4/IPv6 packet per flow (saddr, daddr, IP protocol) and, for UDP
// packets that carry a birdcage probe payload, tracks the probe sequence:
// received, highest, missing, late (and how far behind the highest the
// latest-arriving one was), duplicate, first/last arrival and the largest gap
// between consecutive arrivals.
//
// It never changes a packet and always returns TC_ACT_UNSPEC (== TCX_NEXT),
// so it is transparent and coexists with other TC programs on the same hook.
//
// The probe payload (big endian, right after the UDP header):
//   u32 magic   PROBE_MAGIC
//   u32 flags   reserved, 0
//   u64 seq     starts at 1, +1 per probe of one flow
//   u64 sent_ns CLOCK_MONOTONIC at the sender (same clock as bpf_ktime_get_ns)
// Keep it in sync with probe.go (PutProbe/ParseProbe).

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#define PROBE_MAGIC 0x62634231 /* "bcB1" */
#define IP_MF 0x2000
#define IP_OFFSET 0x1fff
#define NEXTHDR_FRAGMENT 44
#define SEQ_WINDOW 64 /* duplicates are recognised this far behind the highest seq */

struct flow_key {
	__u8 family; /* 4 or 6 */
	__u8 proto;  /* IP protocol (IPv6: the first next header) */
	__u8 inner;  /* 1: the addresses of a packet inside an IPIP outer header */
	__u8 pad;
	__u8 saddr[16]; /* IPv4 uses the first 4 bytes, the rest is zero */
	__u8 daddr[16];
};

struct flow_counters {
	__u64 packets;
	__u64 bytes;
};

struct probe_track {
	struct bpf_spin_lock lock;
	__u32 pad;
	__u64 received;   /* distinct probes (duplicates not counted) */
	__u64 highest_seq;
	__u64 missing;    /* seqs below highest not (yet) seen */
	__u64 late;       /* arrived below the highest seq seen (reordered) */
	__u64 duplicates; /* seen twice within SEQ_WINDOW */
	__u64 first_seq;  /* seq of the first probe to arrive */
	__u64 first_ns;   /* arrival of the first probe */
	__u64 last_ns;    /* arrival of the latest probe */
	__u64 last_seq;
	__u64 max_gap_ns;       /* largest time between consecutive arrivals */
	__u64 max_gap_start_ns; /* arrival that opened the largest gap */
	__u64 max_gap_end_seq;  /* seq whose arrival closed the largest gap */
	__u64 window;           /* bit i: highest_seq - i was seen */
	__u64 max_late_depth;   /* largest highest_seq - seq of a late probe */
};

struct probe_payload {
	__be32 magic;
	__be32 flags;
	__be64 seq;
	__be64 sent_ns;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct flow_key);
	__type(value, struct flow_counters);
} flow_counters SEC(".maps");

/* Not LRU: values with a bpf_spin_lock are not allowed in LRU maps. A full
 * map stops tracking new flows; the counters above still see them. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct flow_key);
	__type(value, struct probe_track);
} probe_tracks SEC(".maps");

static __always_inline void count_flow(struct flow_key *key, __u64 len)
{
	struct flow_counters *c = bpf_map_lookup_elem(&flow_counters, key);
	if (!c) {
		struct flow_counters init = {.packets = 1, .bytes = len};
		if (bpf_map_update_elem(&flow_counters, key, &init, BPF_NOEXIST) == 0)
			return;
		/* Another CPU created it first. */
		c = bpf_map_lookup_elem(&flow_counters, key);
		if (!c)
			return;
	}
	__sync_fetch_and_add(&c->packets, 1);
	__sync_fetch_and_add(&c->bytes, len);
}

static __always_inline void track_probe(struct __sk_buff *skb, struct flow_key *key, __u32 l4, __u64 now)
{
	struct probe_payload p;
	if (bpf_skb_load_bytes(skb, l4 + sizeof(struct udphdr), &p, sizeof(p)) < 0)
		return;
	if (p.magic != bpf_htonl(PROBE_MAGIC))
		return;
	__u64 seq = bpf_be64_to_cpu(p.seq);
	if (seq == 0)
		return;

	struct probe_track *t = bpf_map_lookup_elem(&probe_tracks, key);
	if (!t) {
		struct probe_track zero = {};
		bpf_map_update_elem(&probe_tracks, key, &zero, BPF_NOEXIST);
		t = bpf_map_lookup_elem(&probe_tracks, key);
		if (!t)
			return;
	}

	/* No helper calls below until the unlock. */
	bpf_spin_lock(&t->lock);
	if (t->first_ns == 0) {
		t->first_seq = seq;
		t->first_ns = now;
		t->last_ns = now;
		t->last_seq = seq;
		t->highest_seq = seq;
		t->window = 1;
		t->received = 1;
		bpf_spin_unlock(&t->lock);
		return;
	}
	if (seq > t->highest_seq) {
		__u64 d = seq - t->highest_seq;
		t->missing += d - 1;
		if (d >= SEQ_WINDOW)
			t->window = 1;
		else
			t->window = (t->window << d) | 1;
		t->highest_seq = seq;
	} else {
		__u64 off = t->highest_seq - seq;
		if (off < SEQ_WINDOW) {
			__u64 bit = 1ULL << off;
			if (t->window & bit) {
				t->duplicates++;
				bpf_spin_unlock(&t->lock);
				return;
			}
			t->window |= bit;
		}
		/* Beyond the window a duplicate cannot be told from a late
		 * probe; it is counted as late. */
		t->late++;
		if (off > t->max_late_depth)
			t->max_late_depth = off;
		if (t->missing > 0)
			t->missing--;
	}
	t->received++;
	__u64 gap = now - t->last_ns;
	if (now > t->last_ns && gap > t->max_gap_ns) {
		t->max_gap_ns = gap;
		t->max_gap_start_ns = t->last_ns;
		t->max_gap_end_seq = seq;
	}
	t->last_ns = now;
	t->last_seq = seq;
	bpf_spin_unlock(&t->lock);
}

/* Counts the IPv4 packet at off and tracks it if it is a probe. Returns the
 * offset of the inner header of an IPIP packet (so the caller can count the
 * inner flow too, once), else 0. */
static __always_inline __u32 handle_ipv4(struct __sk_buff *skb, __u32 off, __u8 inner, __u64 now)
{
	struct iphdr ip;
	if (bpf_skb_load_bytes(skb, off, &ip, sizeof(ip)) < 0)
		return 0;
	if (ip.version != 4 || ip.ihl < 5)
		return 0;

	struct flow_key key = {.family = 4, .proto = ip.protocol, .inner = inner};
	__builtin_memcpy(key.saddr, &ip.saddr, 4);
	__builtin_memcpy(key.daddr, &ip.daddr, 4);
	count_flow(&key, skb->len);

	/* Fragments are counted as packets of their flow but never parsed:
	 * only the first carries the UDP header. */
	if (ip.frag_off & bpf_htons(IP_MF | IP_OFFSET))
		return 0;
	__u32 l4 = off + ip.ihl * 4;
	if (ip.protocol == IPPROTO_UDP)
		track_probe(skb, &key, l4, now);
	else if (ip.protocol == IPPROTO_IPIP && !inner)
		return l4;
	return 0;
}

static __always_inline void handle_ipv6(struct __sk_buff *skb, __u32 off, __u64 now)
{
	struct ipv6hdr ip6;
	if (bpf_skb_load_bytes(skb, off, &ip6, sizeof(ip6)) < 0)
		return;
	if (ip6.version != 6)
		return;

	struct flow_key key = {.family = 6, .proto = ip6.nexthdr};
	__builtin_memcpy(key.saddr, &ip6.saddr, 16);
	__builtin_memcpy(key.daddr, &ip6.daddr, 16);
	count_flow(&key, skb->len);

	/* Extension headers (incl. NEXTHDR_FRAGMENT) are not walked: a probe is
	 * UDP directly after the fixed header. */
	if (ip6.nexthdr == IPPROTO_UDP)
		track_probe(skb, &key, off + sizeof(ip6), now);
}

static __always_inline int handle(struct __sk_buff *skb, __u32 l3off)
{
	__u64 now = bpf_ktime_get_ns();
	if (skb->protocol == bpf_htons(ETH_P_IP)) {
		__u32 inner = handle_ipv4(skb, l3off, 0, now);
		if (inner)
			handle_ipv4(skb, inner, 1, now);
	}
	else if (skb->protocol == bpf_htons(ETH_P_IPV6))
		handle_ipv6(skb, l3off, now);
	return TC_ACT_UNSPEC;
}

/* For devices with an Ethernet header (veth, bridge ports, lo). */
SEC("tc")
int count_eth(struct __sk_buff *skb)
{
	return handle(skb, ETH_HLEN);
}

/* For L3 devices without a link-layer header (ipip tunl0). */
SEC("tc")
int count_l3(struct __sk_buff *skb)
{
	return handle(skb, 0);
}

char __license[] SEC("license") = "Dual MIT/GPL";
