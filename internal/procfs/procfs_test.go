package procfs

import "testing"

func TestParseSoftnetDropped(t *testing.T) {
	// Two CPUs as kernel 6.x prints them (hex columns; the second is drops).
	const two = "0001e2a4 0000002a 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000\n" +
		"00010001 00000010 00000003 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000001 00000000\n"
	if got, err := parseSoftnetDropped(two); err != nil || got != 0x2a+0x10 {
		t.Errorf("two CPUs: got %d, %v; want %d", got, err, 0x2a+0x10)
	}
	for _, bad := range []string{"0001", "0001 zz"} {
		if _, err := parseSoftnetDropped(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// The machine's own file reads (every kernel since 2.6 has it).
func TestSoftnetDroppedReadsThisMachine(t *testing.T) {
	if _, err := SoftnetDropped(); err != nil {
		t.Fatal(err)
	}
}
