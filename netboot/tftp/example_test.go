package tftp_test

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"log/slog"
	"net"
	"os"
	"path/filepath"

	"github.com/anvilmetal/anvil/netboot/tftp"
)

// Serve a directory on 127.0.0.1 and fetch a file from it with the
// package's client.
func Example() {
	dir, err := os.MkdirTemp("", "tftp-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "pxelinux.0"), []byte("boot loader"), 0o644); err != nil {
		log.Fatal(err)
	}

	conn, err := net.ListenPacket("udp", "127.0.0.1:0") // port 69 in production
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	reports := make(chan tftp.Transfer, 1)
	srv := &tftp.Server{
		Handler: tftp.DirHandler(dir),
		Logger:  slog.New(slog.DiscardHandler),
		// Called once per transfer, when the client acknowledged the
		// last block (or the transfer failed).
		OnTransfer: func(tr tftp.Transfer) { reports <- tr },
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, conn) }()

	var buf bytes.Buffer
	res, err := tftp.Get(ctx, conn.LocalAddr().String(), "/pxelinux.0",
		tftp.ClientOptions{BlockSize: 1468, TSize: true}, &buf)
	if err != nil {
		log.Fatal(err)
	}
	tr := <-reports
	fmt.Printf("served %s: %d bytes, err=%v\n", tr.Request.Filename, tr.Bytes, tr.Err)
	cancel()
	if err := <-done; err != nil { // Serve returns once every transfer stopped
		log.Fatal(err)
	}
	fmt.Printf("got %q, tsize %d, blksize %d\n", buf.String(), res.TSize, res.BlockSize)
	// Output:
	// served pxelinux.0: 11 bytes, err=<nil>
	// got "boot loader", tsize 11, blksize 1468
}
