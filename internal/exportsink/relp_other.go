//go:build !linux

package exportsink

import "syscall"

// quickAck does nothing where TCP_QUICKACK is not known: a batch's last
// rsp's may then wait for a delayed ACK (relp.go).
func quickAck(syscall.RawConn) {}

// peerSpoke cannot tell here: idle reads with a short deadline instead.
func peerSpoke(syscall.RawConn) (spoke, ok bool) { return false, false }
