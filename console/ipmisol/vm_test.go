package ipmisol_test

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/console"
	"github.com/anvilmetal/anvil/console/ipmisol"
	"github.com/anvilmetal/anvil/internal/ipmisim"
	"github.com/anvilmetal/anvil/internal/vmlab"
)

// serialRelay joins ipmi_sim's SOL device (which connects to a TCP
// address on the host's loopback) to a QEMU serial port served on a Unix
// socket (QEMU runs in the lab's network namespace, whose loopback
// ipmi_sim cannot reach; the file system is shared).
type serialRelay struct {
	ln   net.Listener
	sock string
	ctx  context.Context
	wg   sync.WaitGroup
	mu   sync.Mutex
	open []net.Conn
}

func newSerialRelay(tb testing.TB, ctx context.Context, sock string) *serialRelay {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	r := &serialRelay{ln: ln, sock: sock, ctx: ctx}
	r.wg.Add(1)
	go r.accept() // owned by r; ends when close closes the listener
	tb.Cleanup(r.close)
	return r
}

func (r *serialRelay) track(c net.Conn) {
	r.mu.Lock()
	r.open = append(r.open, c)
	r.mu.Unlock()
}

func (r *serialRelay) accept() {
	defer r.wg.Done()
	for {
		sol, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.track(sol)
		r.wg.Add(1)
		go func() { // ends when either side closes (close closes both)
			defer r.wg.Done()
			defer sol.Close()
			var vm net.Conn
			for r.ctx.Err() == nil { // QEMU's socket appears once the VM starts
				if vm, err = net.Dial("unix", r.sock); err == nil {
					break
				}
				select {
				case <-r.ctx.Done():
				case <-time.After(100 * time.Millisecond):
				}
			}
			if vm == nil {
				return
			}
			r.track(vm)
			defer vm.Close()
			done := make(chan struct{})
			go func() { // ends when sol or vm closes
				_, _ = io.Copy(vm, sol)
				_ = vm.Close()
				close(done)
			}()
			_, _ = io.Copy(sol, vm)
			_ = sol.Close()
			<-done
		}()
	}
}

func (r *serialRelay) close() {
	_ = r.ln.Close()
	r.mu.Lock()
	for _, c := range r.open {
		_ = c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// A QEMU machine whose second serial port (the kernel's console) is
// ipmi_sim's SOL device boots vmlab's marker initramfs; the marker line
// is read through the ipmitool-socat console's TCP port.
func TestVMMarkerThroughConsole(t *testing.T) {
	ipmisim.Require(t)
	n := vmlab.NewTestNetwork(t) // skips unless ANVIL_TEST_QEMU=1
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cache, err := vmlab.DefaultCache()
	if err != nil {
		t.Fatal(err)
	}
	kernel, err := vmlab.DebianKernel(ctx, cache)
	if errors.Is(err, vmlab.ErrUnavailable) {
		t.Skip(err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	initrd, err := vmlab.MarkerInitramfs(cache, "")
	if errors.Is(err, vmlab.ErrUnavailable) {
		t.Skip(err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	sock := filepath.Join(dir, "sol.sock")
	relay := newSerialRelay(t, ctx, sock)
	bmc := ipmisim.Start(t, ipmisim.Options{SOL: relay.ln.Addr().String(), Password: password})
	m := console.NewManager(console.Options{})
	defer m.Close()
	r := &rig{m: m, c: ipmisol.New(m, ipmisol.Options{}), bmc: bmc, task: simTask(bmc)}
	info := r.start(t)
	tcp, err := net.Dial("tcp", info.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()

	const marker = "ipmisol-vm-marker"
	vm, err := vmlab.StartVM(ctx, n, vmlab.VMOptions{
		Name: "solvm", MAC: "52:54:00:a0:00:51",
		Kernel: kernel.Path, Initrd: initrd,
		// The kernel's console, where the marker init writes, is ttyS1
		// alone: with console=ttyS0 beside it, Debian's 6.1 kernel never
		// enabled ttyS1 and the marker went to ttyS0.
		Append: "console=ttyS1,115200 anvil.marker=" + marker,
		ExtraArgs: []string{
			"-chardev", "socket,id=sol,path=" + sock + ",server=on,wait=off",
			"-serial", "chardev:sol",
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = vm.Stop() }()
	defer func() { // before Stop, which removes the VM's files
		if !t.Failed() {
			return
		}
		if log, err := os.ReadFile(vm.ConsoleLog); err == nil {
			t.Logf("ttyS0:\n%s", tail(string(log), 2000))
		}
		if chunks, err := m.Transcript(nodeUUID); err == nil {
			var b strings.Builder
			for _, ch := range chunks {
				b.Write(ch.Data)
			}
			t.Logf("console transcript:\n%s", tail(b.String(), 2000))
		}
		t.Logf("QEMU: %v", vm.Args)
	}()
	began := time.Now()
	readUntil(t, tcp, vmlab.MarkerPrefix+" "+marker, 5*time.Minute)
	t.Logf("marker read through the ipmitool-socat console %.1fs after QEMU started", time.Since(began).Seconds())
}

// tail returns the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
