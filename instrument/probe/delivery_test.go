package probe

// Holds delivery.go in place: the per-bin series and the disruption list
// are by send time, count every run of lost probes once, and mark a run
// that never recovered as open.

import "testing"

func TestDeliveryAndDisruptions(t *testing.T) {
	// 1 kHz for 100 ms: 10 probes per 10 ms bin, seqs 1..100.
	sb := &sendBins{startNs: 1_000_000_000}
	for seq := uint64(1); seq <= 100; seq++ {
		sb.record(seq, sb.startNs+int64(seq-1)*1_000_000)
	}
	var seen seqBitmap
	for seq := uint64(1); seq <= 100; seq++ {
		lost := (seq >= 21 && seq <= 35) || seq == 50 || seq >= 96
		if !lost {
			seen.set(seq)
		}
	}
	d := delivery(sb, seen, 79)
	if len(d.Sent) != 10 || d.BinMs != 10 {
		t.Fatalf("want 10 bins of 10 ms, got %d of %v", len(d.Sent), d.BinMs)
	}
	wantRecv := []uint32{10, 10, 0, 5, 9, 10, 10, 10, 10, 5}
	for i, w := range wantRecv {
		if d.Sent[i] != 10 || d.Received[i] != w {
			t.Errorf("bin %d: sent %d received %d, want 10/%d", i, d.Sent[i], d.Received[i], w)
		}
	}
	list, n := disruptions(sb, seen)
	if n != 3 || len(list) != 3 {
		t.Fatalf("want 3 disruptions, got %d (%+v)", n, list)
	}
	if l := list[0]; l.FirstSeq != 21 || l.LastSeq != 35 || l.Lost != 15 || l.DurationMs() != 15 || l.Open {
		t.Errorf("first disruption %+v, want seqs 21..35, 15 lost over 15 ms", l)
	}
	if l := list[1]; l.Lost != 1 || l.DurationMs() != 1 {
		t.Errorf("second disruption %+v, want one probe over 1 ms", l)
	}
	if l := list[2]; !l.Open || l.FirstSeq != 96 || l.Lost != 5 {
		t.Errorf("last disruption %+v, want open from seq 96", l)
	}
}

func TestDeliveryMergesBinsOfLongSessions(t *testing.T) {
	// 100 Hz for 50 s: 5000 fine bins merge to 3 per bin (1667 bins).
	sb := &sendBins{}
	var seen seqBitmap
	for seq := uint64(1); seq <= 5000; seq++ {
		sb.record(seq, int64(seq-1)*10_000_000)
		seen.set(seq)
	}
	d := delivery(sb, seen, 5000)
	if len(d.Sent) > maxDeliveryBins || d.BinMs != 30 {
		t.Fatalf("got %d bins of %v ms, want at most %d of 30 ms", len(d.Sent), d.BinMs, maxDeliveryBins)
	}
	var sum uint32
	for i := range d.Sent {
		sum += d.Received[i]
	}
	if sum != 5000 {
		t.Errorf("bins hold %d probes, want 5000", sum)
	}
	if _, n := disruptions(sb, seen); n != 0 {
		t.Errorf("no loss but %d disruptions", n)
	}
}
