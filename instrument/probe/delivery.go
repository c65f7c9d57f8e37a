package probe

import (
	"math/bits"
	"sort"
)

// Delivery over time and the list of disruptions, for the handover report
// and for budgets that count distinct gaps. Both come from which sequence
// numbers the receiving socket saw (a bitmap per flow) and when the sender
// sent each one (the first sequence number of every 10 ms bin), so they are
// by send time: a late probe fills its own bin, and a receiver stalled by
// the scheduler does not make a hole. The BPF tracker stays the measurement
// of record for Lost and LongestGapMs; Delivery.SocketReceived says how many
// the socket saw, so a reader can tell when the two disagree (socket drops).

// DeliveryBinNs is the finest bin of a delivery series.
const DeliveryBinNs = int64(10_000_000)

// maxDeliveryBins bounds a flow's series in the report: a longer session
// gets wider bins (a multiple of DeliveryBinNs).
const maxDeliveryBins = 2000

// maxDisruptions bounds the disruptions listed per flow (all are counted).
const maxDisruptions = 64

// maxTrackedSeq bounds the receiver's bitmap (2 MiB per flow).
const maxTrackedSeq = 1 << 24

// seqBitmap is the set of sequence numbers seen.
type seqBitmap []uint64

func (b *seqBitmap) set(seq uint64) bool {
	if seq == 0 || seq >= maxTrackedSeq {
		return false
	}
	w := seq / 64
	for uint64(len(*b)) <= w {
		*b = append(*b, 0)
	}
	m := uint64(1) << (seq % 64)
	if (*b)[w]&m != 0 {
		return false
	}
	(*b)[w] |= m
	return true
}

func (b seqBitmap) has(seq uint64) bool {
	w := seq / 64
	return w < uint64(len(b)) && b[w]&(1<<(seq%64)) != 0
}

// count is how many of lo..hi-1 are set.
func (b seqBitmap) count(lo, hi uint64) uint64 {
	var n uint64
	for s := lo; s < hi; {
		w := s / 64
		if w >= uint64(len(b)) {
			break
		}
		if s%64 == 0 && s+64 <= hi {
			n += uint64(bits.OnesCount64(b[w]))
			s += 64
			continue
		}
		if b.has(s) {
			n++
		}
		s++
	}
	return n
}

// sendBins is when the sender sent each sequence number, to 10 ms: first[i]
// is the first sequence number sent at or after bin i's start.
type sendBins struct {
	startNs int64
	first   []uint64
	sent    uint64 // highest sequence number sent
	lastNs  int64
}

// record is called by the send loop for every probe sent.
func (sb *sendBins) record(seq uint64, now int64) {
	b := (now - sb.startNs) / DeliveryBinNs
	for int64(len(sb.first)) <= b {
		sb.first = append(sb.first, seq)
	}
	sb.sent, sb.lastNs = seq, now
}

// sendTime estimates when seq was sent: its bin, and its place among the
// bin's sends (the loop sends at an even cadence within a bin).
func (sb *sendBins) sendTime(seq uint64) int64 {
	if len(sb.first) == 0 {
		return sb.startNs
	}
	if seq > sb.sent {
		return sb.lastNs
	}
	// The last bin whose first sequence number is <= seq is where it went.
	b := sort.Search(len(sb.first), func(i int) bool { return sb.first[i] > seq }) - 1
	if b < 0 {
		b = 0
	}
	next := sb.sent + 1
	if b+1 < len(sb.first) {
		next = sb.first[b+1]
	}
	t := sb.startNs + int64(b)*DeliveryBinNs
	if n := next - sb.first[b]; n > 0 {
		t += int64(float64(seq-sb.first[b]) / float64(n) * float64(DeliveryBinNs))
	}
	return t
}

// delivery builds the flow's series (bins merged to at most
// maxDeliveryBins) from the send bins and the seen set.
func delivery(sb *sendBins, seen seqBitmap, socketReceived uint64) *Delivery {
	if len(sb.first) == 0 {
		return nil
	}
	k := (len(sb.first) + maxDeliveryBins - 1) / maxDeliveryBins
	d := &Delivery{StartNs: sb.startNs, BinMs: float64(int64(k)*DeliveryBinNs) / 1e6, SocketReceived: socketReceived}
	for i := 0; i < len(sb.first); i += k {
		lo := sb.first[i]
		hi := sb.sent + 1
		if i+k < len(sb.first) {
			hi = sb.first[i+k]
		}
		d.Sent = append(d.Sent, uint32(hi-lo))
		d.Received = append(d.Received, uint32(seen.count(lo, hi)))
	}
	return d
}

// disruptions lists the runs of lost sequence numbers 1..sent (at most
// maxDisruptions, the first ones) and counts them all.
func disruptions(sb *sendBins, seen seqBitmap) (list []Disruption, count int) {
	var run *Disruption
	flush := func(next uint64) {
		if run == nil {
			return
		}
		if next > sb.sent {
			run.EndNs, run.Open = sb.lastNs, true
		} else {
			run.EndNs = sb.sendTime(next)
		}
		count++
		if len(list) < maxDisruptions {
			list = append(list, *run)
		}
		run = nil
	}
	for s := uint64(1); s <= sb.sent && s < maxTrackedSeq; s++ {
		if seen.has(s) {
			flush(s)
			continue
		}
		if run == nil {
			run = &Disruption{FirstSeq: s, StartNs: sb.sendTime(s)}
		}
		run.LastSeq = s
		run.Lost++
	}
	flush(sb.sent + 1)
	return list, count
}
