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
