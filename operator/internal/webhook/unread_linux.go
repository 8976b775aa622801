package webhook

import (
	"net"

	"golang.org/x/sys/unix"
)

// unreadBytes is how many received bytes wait to be read on conn (SIOCINQ).
func unreadBytes(conn *net.TCPConn) (int, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return 0, err
	}
	n := 0
	var ioctlErr error
	if err := raw.Control(func(fd uintptr) { n, ioctlErr = unix.IoctlGetInt(int(fd), unix.SIOCINQ) }); err != nil {
		return 0, err
	}
	return n, ioctlErr
}
