package exportsink

import "syscall"

// quickAck asks Linux to acknowledge what arrives next at once instead of
// delaying the ACK (TCP_QUICKACK lasts until the kernel leaves quick-ACK
// mode again, so it is asked for before each read that may block).
func quickAck(rc syscall.RawConn) {
	rc.Control(func(fd uintptr) {
		syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_QUICKACK, 1)
	})
}

// peerSpoke reports, without waiting, whether the peer of rc sent
// anything not yet read or closed the connection; ok is false when it
// cannot tell.
func peerSpoke(rc syscall.RawConn) (spoke, ok bool) {
	var err error
	if cerr := rc.Read(func(fd uintptr) bool {
		var b [1]byte
		_, _, err = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return true
	}); cerr != nil {
		return false, false
	}
	// EAGAIN: nothing waiting. Otherwise n > 0 is data, n == 0 with no
	// error EOF, and an error a reset: all of them the peer speaking.
	return err != syscall.EAGAIN, true
}
