package vmlab

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
)

// consoleRelay is the serial console of a machine that boots many times
// (BMCMachine, RedfishMachine): the harness listens on a socket in the
// machine's directory and each QEMU it starts connects there, so that
// not a byte is lost; every boot's bytes go, in order, into one Console,
// into the log file beside the socket and, when set, to tee.
type consoleRelay struct {
	console *Console
	logPath string

	ln   net.Listener
	w    *io.PipeWriter
	file *os.File
	tee  func([]byte)

	mu   sync.Mutex
	conn net.Conn // the running QEMU's connection
}

// newConsoleRelay listens on dir/con.sock and creates dir/console.log.
// tee, when not nil, gets a copy of each read (from the relay's
// goroutine).
func newConsoleRelay(dir string, tee func([]byte)) (*consoleRelay, error) {
	ln, err := net.Listen("unix", filepath.Join(dir, "con.sock"))
	if err != nil {
		return nil, fmt.Errorf("vmlab: console socket: %w", err)
	}
	r := &consoleRelay{ln: ln, logPath: filepath.Join(dir, "console.log"), tee: tee}
	if r.file, err = os.Create(r.logPath); err != nil {
		ln.Close()
		return nil, err
	}
	var pr *io.PipeReader
	pr, r.w = io.Pipe()
	r.console = newConsole(pr)
	return r, nil
}

// addr is the socket QEMU's console chardev connects to.
func (r *consoleRelay) addr() string { return r.ln.Addr().String() }

// current returns the running QEMU's connection (nil between boots), to
// type into its console.
func (r *consoleRelay) current() net.Conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.conn
}

// serve takes each QEMU's connection in turn (a new one replaces the
// last) and copies it out until close; the caller runs it in a goroutine
// counted by wg.
func (r *consoleRelay) serve(wg *sync.WaitGroup) {
	defer wg.Done()
	serveLatest(r.ln, &r.mu, &r.conn, r.copyOut)
}

// copyOut copies one boot's console until QEMU closes it.
func (r *consoleRelay) copyOut(c net.Conn) {
	buf := make([]byte, 4096)
	for {
		k, err := c.Read(buf)
		if k > 0 {
			// The file first: a line the Console shows is in the file.
			_, _ = r.file.Write(buf[:k])
			_, _ = r.w.Write(buf[:k])
			if r.tee != nil {
				r.tee(buf[:k])
			}
		}
		if err != nil {
			break
		}
	}
	c.Close()
}

// serveLatest accepts connections on ln until it is closed: each one
// replaces (and closes) the connection in *cur, under mu, and goes to
// handle.
func serveLatest(ln net.Listener, mu *sync.Mutex, cur *net.Conn, handle func(net.Conn)) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		mu.Lock()
		if old := *cur; old != nil {
			old.Close()
		}
		*cur = c
		mu.Unlock()
		handle(c)
	}
}

// close stops serve: the socket, the log file and the running QEMU's
// connection.
func (r *consoleRelay) close() {
	r.ln.Close()
	r.file.Close()
	if c := r.current(); c != nil {
		c.Close()
	}
}

// stop closes the relay, waits for wg (the owner's goroutines, serve
// among them), then ends the Console's transcript once it has read the
// last bytes. On a nil relay (a start that failed before making it) it
// only waits.
func (r *consoleRelay) stop(wg *sync.WaitGroup) {
	if r != nil {
		r.close()
	}
	wg.Wait()
	if r != nil {
		r.w.Close()
		<-r.console.done
	}
}
