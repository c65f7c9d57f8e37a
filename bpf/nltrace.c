//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR MIT)
//
// birdcage's netlink route trace: two raw tracepoint programs, on sys_enter
// and sys_exit, that copy what the processes of one network namespace send
// and receive over netlink about routes:
//   - a sendto/sendmsg whose first netlink message is an RTM_NEWROUTE or
//     RTM_DELROUTE request: the request as sent (netlink header, rtmsg,
//     attributes; cut at DATA_MAX bytes);
//   - a recvfrom/recvmsg/recvmmsg datagram that begins with a netlink
//     message of type NLMSG_ERROR (an ack: error 0, or the -errno the kernel
//     refused a request with); recvmmsg: its first RECV_MMSG_MAX datagrams.
// A send longer than DATA_MAX (a batch of requests in one sendto) goes out
// as up to SEND_CHUNKS records of DATA_MAX bytes, which Go joins again.
// Go pairs each request with its ack (same process, same sequence number).
//
// Why syscalls and not the rtnetlink handlers: on this project's kernels
// fentry/fexit and kprobes cannot be loaded or attached (see nltrace.go), raw
// tracepoints can, and user memory may be read under lockdown=integrity.
//
// "One network namespace" is the sending task's (task->nsproxy->net_ns): a
// BIRD or programmer run inside a node's namespace, or `ip -n NODE`.
//
// Syscall numbers and the pt_regs layout are the x86-64 ones (set from Go;
// the struct is relocated against the kernel's BTF at load, CO-RE).
// It never changes a syscall or its result.

#include <linux/bpf.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#define DATA_MAX 512
#define SEND_CHUNKS 8
#define RECV_MMSG_MAX 16
#define RTM_NEWROUTE 24
#define RTM_DELROUTE 25
#define NLMSG_ERROR 2
#define KIND_SEND 1
#define KIND_RECV 2

struct ns_common {
	unsigned int inum;
} __attribute__((preserve_access_index));

struct net {
	struct ns_common ns;
} __attribute__((preserve_access_index));

struct nsproxy {
	struct net *net_ns;
} __attribute__((preserve_access_index));

struct task_struct {
	struct nsproxy *nsproxy;
} __attribute__((preserve_access_index));

struct pt_regs {
	unsigned long di;
	unsigned long si;
	unsigned long dx;
} __attribute__((preserve_access_index));

/* User space layouts (LP64). */
struct user_msghdr {
	void *msg_name;
	int msg_namelen;
	void *msg_iov;
	__u64 msg_iovlen;
	void *msg_control;
	__u64 msg_controllen;
	unsigned int msg_flags;
};

struct user_mmsghdr {
	struct user_msghdr msg_hdr;
	unsigned int msg_len;
};

struct user_iovec {
	void *iov_base;
	__u64 iov_len;
};

struct nlmsghdr {
	__u32 nlmsg_len;
	__u16 nlmsg_type;
	__u16 nlmsg_flags;
	__u32 nlmsg_seq;
	__u32 nlmsg_pid;
};

struct event {
	__u64 ts_ns;    /* CLOCK_MONOTONIC */
	__u64 id;       /* the chunks of one send share it (their first ts_ns) */
	__u32 pid;      /* host tgid */
	__u32 tid;      /* host tid */
	__u32 netns;    /* inode number of the task's network namespace */
	__u32 kind;     /* KIND_SEND or KIND_RECV */
	__u32 len;      /* bytes sent (first buffer) or received */
	__u32 captured; /* bytes copied into data */
	__u32 offset;   /* of data within the send (chunks after the first) */
	__u32 pad;
	char comm[16];
	__u8 data[DATA_MAX];
};

#define RECV_FROM 0
#define RECV_MSG 1
#define RECV_MMSG 2

/* A recv in progress: where its data will land. */
struct pending {
	__u64 ptr; /* recvfrom: the buffer; recvmsg: the msghdr; recvmmsg: the mmsghdr vector */
	__u32 how; /* RECV_* */
	__u32 pad;
};

volatile const __u32 target_netns = 0;
volatile const __u32 nr_sendto = 0;
volatile const __u32 nr_recvfrom = 0;
volatile const __u32 nr_sendmsg = 0;
volatile const __u32 nr_recvmsg = 0;
volatile const __u32 nr_recvmmsg = 0;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct pending);
} pending SEC(".maps");

/* Events the ring buffer had no room for. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} dropped SEC(".maps");

static __always_inline __u32 current_netns(void)
{
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();
	return BPF_CORE_READ(t, nsproxy, net_ns, ns.inum);
}

/* The first buffer of a msghdr in user memory. */
static __always_inline int first_iov(__u64 msghdr, __u64 *base, __u64 *len)
{
	struct user_msghdr m;
	struct user_iovec v;
	if (bpf_probe_read_user(&m, sizeof(m), (void *)msghdr) || !m.msg_iovlen)
		return -1;
	if (bpf_probe_read_user(&v, sizeof(v), m.msg_iov))
		return -1;
	*base = (__u64)v.iov_base;
	*len = v.iov_len;
	return 0;
}

static __always_inline void emit(__u32 kind, __u64 buf, __u64 len, __u64 id, __u32 offset)
{
	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		__u32 k = 0;
		__u64 *d = bpf_map_lookup_elem(&dropped, &k);
		if (d)
			__sync_fetch_and_add(d, 1);
		return;
	}
	__u64 pt = bpf_get_current_pid_tgid();
	e->ts_ns = bpf_ktime_get_ns();
	e->id = id ? id : e->ts_ns;
	e->offset = offset;
	e->pad = 0;
	e->pid = pt >> 32;
	e->tid = (__u32)pt;
	e->netns = target_netns;
	e->kind = kind;
	e->len = len;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	__u32 n = len > DATA_MAX ? DATA_MAX : len;
	e->captured = n;
	if (bpf_probe_read_user(e->data, n, (void *)buf))
		e->captured = 0;
	bpf_ringbuf_submit(e, 0);
}

SEC("raw_tracepoint/sys_enter")
int nltrace_enter(struct bpf_raw_tracepoint_args *ctx)
{
	__u64 id = ctx->args[1];
	if (id != nr_sendto && id != nr_sendmsg && id != nr_recvfrom && id != nr_recvmsg && id != nr_recvmmsg)
		return 0;
	if (current_netns() != target_netns)
		return 0;
	struct pt_regs *regs = (struct pt_regs *)ctx->args[0];
	__u64 arg2 = BPF_CORE_READ(regs, si);
	if (id == nr_recvfrom || id == nr_recvmsg || id == nr_recvmmsg) {
		struct pending p = {.ptr = arg2, .how = id == nr_recvfrom ? RECV_FROM : id == nr_recvmsg ? RECV_MSG : RECV_MMSG};
		__u32 tid = (__u32)bpf_get_current_pid_tgid();
		bpf_map_update_elem(&pending, &tid, &p, BPF_ANY);
		return 0;
	}
	__u64 buf = arg2, len = BPF_CORE_READ(regs, dx);
	if (id == nr_sendmsg && first_iov(arg2, &buf, &len))
		return 0;
	struct nlmsghdr h;
	if (len < sizeof(h) || bpf_probe_read_user(&h, sizeof(h), (void *)buf))
		return 0;
	if (h.nlmsg_type != RTM_NEWROUTE && h.nlmsg_type != RTM_DELROUTE)
		return 0;
	__u64 first = bpf_ktime_get_ns();
	for (__u32 i = 0; i < SEND_CHUNKS; i++) {
		__u64 off = (__u64)i * DATA_MAX;
		if (off >= len)
			break;
		emit(KIND_SEND, buf + off, len - off, first, off);
	}
	return 0;
}

/* One received datagram: kept when it begins with an ack. */
static __always_inline void recv_one(__u64 buf, __u64 len)
{
	struct nlmsghdr h;
	if (len < sizeof(h) || bpf_probe_read_user(&h, sizeof(h), (void *)buf) || h.nlmsg_type != NLMSG_ERROR)
		return;
	emit(KIND_RECV, buf, len, 0, 0);
}

SEC("raw_tracepoint/sys_exit")
int nltrace_exit(struct bpf_raw_tracepoint_args *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct pending *pp = bpf_map_lookup_elem(&pending, &tid);
	if (!pp)
		return 0;
	struct pending p = *pp;
	bpf_map_delete_elem(&pending, &tid);
	long ret = (long)ctx->args[1];
	if (ret <= 0)
		return 0;
	__u64 buf = p.ptr, ignored;
	if (p.how == RECV_MMSG) {
		/* ret datagrams; each mmsghdr says how long its own is. */
		for (__u32 i = 0; i < RECV_MMSG_MAX; i++) {
			if (i >= ret)
				break;
			struct user_mmsghdr m;
			struct user_iovec v;
			if (bpf_probe_read_user(&m, sizeof(m), (void *)(p.ptr + (__u64)i * sizeof(m))) || !m.msg_hdr.msg_iovlen)
				break;
			if (bpf_probe_read_user(&v, sizeof(v), m.msg_hdr.msg_iov))
				break;
			recv_one((__u64)v.iov_base, m.msg_len);
		}
		return 0;
	}
	if (p.how == RECV_MSG && first_iov(p.ptr, &buf, &ignored))
		return 0;
	recv_one(buf, ret);
	return 0;
}

char __license[] SEC("license") = "Dual MIT/GPL";
