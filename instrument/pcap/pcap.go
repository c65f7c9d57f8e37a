package pcap

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"
	"unsafe"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
	"golang.org/x/sys/unix"
)

// Filter says whether to keep a packet; data starts at the link layer the
// file's LinkType names (Ethernet, or the IP header on an L3 device such
// as tunl0).
type Filter func(link layers.LinkType, data []byte) bool

// Options name what to capture and where.
type Options struct {
	Netns string // the namespace's path
	Iface string
	Path  string // the pcap file, created (truncated)
	// Keep filters packets; nil keeps every one.
	Keep Filter
	// Snaplen is how many bytes of each packet are written; 0: 256 (enough
	// for the headers and a probe's sequence number).
	Snaplen int
	// MaxBytes bounds the file; packets past it are counted, not written.
	// 0: 64 MiB.
	MaxBytes int64
}

// Capture is one running capture.
type Capture struct {
	o      Options
	link   layers.LinkType
	file   *os.File
	sock   *os.File
	buf    *bufio.Writer
	w      *pcapgo.Writer
	done   chan struct{}
	mu     sync.Mutex
	stats  Stats
	err    error
	closed bool
}

// Start opens the socket in the namespace and starts writing.
func Start(o Options) (*Capture, error) {
	if o.Snaplen == 0 {
		o.Snaplen = 256
	}
	if o.MaxBytes == 0 {
		o.MaxBytes = 64 << 20
	}
	netns, err := ns.GetNS(o.Netns)
	if err != nil {
		return nil, fmt.Errorf("capture %s: %w", o.Iface, err)
	}
	defer netns.Close()
	var fd int
	var link layers.LinkType
	err = netns.Do(func(ns.NetNS) error {
		ifc, err := net.InterfaceByName(o.Iface)
		if err != nil {
			return err
		}
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return fmt.Errorf("AF_PACKET socket: %w", err)
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifc.Index}); err != nil {
			unix.Close(fd)
			return fmt.Errorf("bind to %s: %w", o.Iface, err)
		}
		// Ethernet and loopback devices hand packets over with an
		// Ethernet header; an L3 device (tunl0: ARPHRD_TUNNEL) from the IP
		// header on.
		link = layers.LinkTypeRaw
		if sa, err := unix.Getsockname(fd); err == nil {
			if ll, ok := sa.(*unix.SockaddrLinklayer); ok && (ll.Hatype == unix.ARPHRD_ETHER || ll.Hatype == unix.ARPHRD_LOOPBACK) {
				link = layers.LinkTypeEthernet
			}
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
			unix.Close(fd)
			return fmt.Errorf("SO_TIMESTAMPNS: %w", err)
		}
		// Forced past net.core.rmem_max (Debian's default is 208 KiB, a
		// few hundred probe packets): a reader starved of CPU, as in a
		// guest under software emulation, must find the packets queued,
		// not dropped. Without CAP_NET_ADMIN, as much as rmem_max allows.
		if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, rcvBuf) != nil {
			_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, rcvBuf)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("capture %s in %s: %w", o.Iface, o.Netns, err)
	}
	sock := os.NewFile(uintptr(fd), "packet:"+o.Iface)
	f, err := os.Create(o.Path)
	if err != nil {
		sock.Close()
		return nil, fmt.Errorf("capture %s: %w", o.Iface, err)
	}
	c := &Capture{o: o, link: link, file: f, sock: sock, buf: bufio.NewWriterSize(f, 1<<16), done: make(chan struct{})}
	c.w = pcapgo.NewWriterNanos(c.buf)
	if err := c.w.WriteFileHeader(uint32(o.Snaplen), link); err != nil {
		sock.Close()
		f.Close()
		return nil, fmt.Errorf("capture %s: %w", o.Path, err)
	}
	c.stats.Bytes = 24
	go c.loop()
	return c, nil
}

// LinkType is the file's link type.
func (c *Capture) LinkType() layers.LinkType { return c.link }

func (c *Capture) loop() {
	defer close(c.done)
	rc, err := c.sock.SyscallConn()
	if err != nil {
		c.setErr(err)
		return
	}
	pkt := make([]byte, 65536)
	oob := make([]byte, unix.CmsgSpace(int(unsafe.Sizeof(unix.Timespec{}))))
	for {
		var n, oobn int
		var rerr error
		err := rc.Read(func(fd uintptr) bool {
			n, oobn, _, _, rerr = unix.Recvmsg(int(fd), pkt, oob, unix.MSG_TRUNC)
			return rerr != unix.EAGAIN
		})
		if err != nil {
			c.mu.Lock()
			stopping := c.closed
			c.mu.Unlock()
			if !stopping {
				c.setErr(err)
				return
			}
			// Stop: what is still queued on the socket crossed the
			// interface before it; read it without waiting (the fd is
			// non-blocking), up to the first EAGAIN.
			_ = rc.Control(func(fd uintptr) {
				for {
					n, oobn, _, _, rerr = unix.Recvmsg(int(fd), pkt, oob, unix.MSG_TRUNC)
					if rerr != nil {
						if rerr != unix.EAGAIN {
							c.setErr(rerr)
						}
						return
					}
					if err := c.write(pkt, n, oob[:oobn]); err != nil {
						c.setErr(err)
						return
					}
				}
			})
			return
		}
		if rerr != nil {
			c.setErr(rerr)
			return
		}
		if err := c.write(pkt, n, oob[:oobn]); err != nil {
			c.setErr(err)
			return
		}
	}
}

// write puts one received packet (n bytes on the wire, its control
// messages in oob) in the file, if the filter keeps it.
func (c *Capture) write(pkt []byte, n int, oob []byte) error {
	ts := time.Now()
	if msgs, err := unix.ParseSocketControlMessage(oob); err == nil {
		for _, m := range msgs {
			if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SCM_TIMESTAMPNS && len(m.Data) >= int(unsafe.Sizeof(unix.Timespec{})) {
				t := (*unix.Timespec)(unsafe.Pointer(&m.Data[0]))
				ts = time.Unix(t.Sec, t.Nsec)
			}
		}
	}
	length := n
	if n > len(pkt) {
		n = len(pkt)
	}
	data := pkt[:n]
	if c.o.Keep != nil && !c.o.Keep(c.link, data) {
		return nil
	}
	if len(data) > c.o.Snaplen {
		data = data[:c.o.Snaplen]
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stats.Bytes+16+int64(len(data)) > c.o.MaxBytes {
		c.stats.OverLimit++
		return nil
	}
	if err := c.w.WritePacket(gopacket.CaptureInfo{Timestamp: ts, CaptureLength: len(data), Length: length}, data); err != nil {
		return err
	}
	c.stats.Packets++
	c.stats.Bytes += 16 + int64(len(data))
	return nil
}

func (c *Capture) setErr(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = fmt.Errorf("capture %s: %w", c.o.Iface, err)
	}
	c.mu.Unlock()
}

// Stats is what the capture wrote so far.
func (c *Capture) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

// Stop ends the capture, flushes and closes the file, and returns its
// statistics. It is safe to call more than once.
func (c *Capture) Stop() (Stats, error) {
	c.mu.Lock()
	if c.closed {
		defer c.mu.Unlock()
		return c.stats, c.err
	}
	c.closed = true
	c.mu.Unlock()
	var drops int64
	if rc, err := c.sock.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) {
			if st, err := unix.GetsockoptTpacketStats(int(fd), unix.SOL_PACKET, unix.PACKET_STATISTICS); err == nil {
				drops = int64(st.Drops)
			}
		})
	}
	// Drain before closing: a read deadline in the past makes the loop
	// read every packet already queued on the socket and return at the
	// first EAGAIN (closing at once dropped what the loop had not read
	// yet — under load, the whole of a short check's packets).
	var cerr error
	if err := c.sock.SetReadDeadline(time.Now()); err != nil {
		cerr = c.sock.Close()
		<-c.done
	} else {
		<-c.done
		cerr = c.sock.Close()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stats.KernelDrops = drops
	err := errors.Join(c.err, cerr, c.buf.Flush(), c.file.Close())
	c.err = err
	return c.stats, err
}

// rcvBuf is each capture socket's receive buffer, as asked of the kernel
// (which doubles it for its own accounting): about 10000 probe packets
// queued before one is dropped.
const rcvBuf = 8 << 20

func htons(v uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return binary.NativeEndian.Uint16(b[:])
}
