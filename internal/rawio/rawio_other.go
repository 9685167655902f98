//go:build !linux

package rawio

import "syscall"

// New returns nil: raw calls are Linux's here, and elsewhere callers use
// the descriptor as it is.
func New(syscall.Conn) *Conn { return nil }

// Read, Write and TryWrite are never called on a Conn New did not make.
func (c *Conn) Read([]byte) (int, error)  { panic("rawio: Read without New") }
func (c *Conn) Write([]byte) (int, error) { panic("rawio: Write without New") }
func (c *Conn) TryWrite([]byte) int       { panic("rawio: TryWrite without New") }
