package console

import (
	"errors"
	"io"
	"net"
	"time"
)

// refusalWriteTimeout bounds writing the one-line refusal to a TCP
// client that cannot have the console.
const refusalWriteTimeout = time.Second

// serveTCP accepts raw console clients until the listener closes. Like
// Ironic's socat console (max-children=1) it serves one client at a
// time; that client holds the keyboard.
func (s *session) serveTCP() {
	defer s.wg.Done()
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || s.ctx.Err() != nil {
				return
			}
			s.logger().warn("console accept failed", "error", err)
			select {
			case <-s.ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serveConn(conn)
		}()
	}
}

func (s *session) serveConn(conn net.Conn) {
	defer conn.Close()
	c, err := s.attach(ReadWrite, func() { _ = conn.Close() })
	if err != nil {
		_ = conn.SetWriteDeadline(time.Now().Add(refusalWriteTimeout))
		_, _ = io.WriteString(conn, err.Error()+"\r\n")
		return
	}
	defer c.Close()
	keys := make(chan struct{})
	go func() {
		defer close(keys)
		_, _ = io.Copy(c, conn)
		_ = c.Close()
	}()
	_, _ = io.Copy(conn, c)
	_ = conn.Close()
	<-keys
}
