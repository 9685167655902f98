package rawio

import (
	"net"
	"os"
	"syscall"
)

// Conn reads and writes one descriptor raw. It is safe for one reader
// and one writer at a time, as the descriptor it wraps.
type Conn struct {
	rc   syscall.RawConn
	nc   net.Conn // set for a socket: its errors name its addresses
	file *os.File // set for a file
}

// wrap gives an error of the poller or of a system call the shape the
// plain Read or Write would have given it.
func (c *Conn) wrap(op string, err error) error {
	switch {
	case c.nc != nil:
		return &net.OpError{Op: op, Net: c.nc.LocalAddr().Network(), Source: c.nc.LocalAddr(), Addr: c.nc.RemoteAddr(), Err: err}
	case c.file != nil:
		return &os.PathError{Op: op, Path: c.file.Name(), Err: err}
	}
	return err
}
