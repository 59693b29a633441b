package tcpinfo

import "golang.org/x/sys/unix"

// read returns the kernel's counts of the socket fd (TCP_INFO).
func read(fd uintptr) Counts {
	info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	if err != nil {
		return Counts{}
	}
	return Counts{Segments: uint64(info.Segs_out), Retransmits: uint64(info.Total_retrans)}
}
