// Package tftp is a small read-only TFTP server for network boot, and a
// client for tests and benchmarks.
//
// The server speaks RFC 1350 read requests in octet and netascii mode
// with the option extension of RFC 2347: blksize (RFC 2348), tsize and
// timeout (RFC 2349) and windowsize (RFC 7440). Write requests are
// refused with error 2, as is any filename that climbs out of the root
// with "..", before the Handler sees it. Each transfer runs on its own
// goroutine and UDP socket (its transfer ID); packets from any other
// address get error 5 and leave the transfer alone. Block numbers roll
// over from 65535 to 0, so files of any size are served, even in 512-byte
// blocks. The number of transfers at once, the retransmission timeout,
// the retries and the largest block and window a client may negotiate
// are the Server's fields; see their defaults.
//
// Netascii is converted on the way out (LF to CR LF, CR to CR NUL), so
// text files keep working for old clients; tsize is not acknowledged in
// that mode, since the size on the wire is not the file's.
//
// Everything from the network is bounded: a request is at most 512 bytes
// with at most 16 options, a stalled client costs at most Retries
// timeouts, and a request beyond MaxTransfers waits in a queue of at
// most MaxQueued (unanswered, so that firmware retries rather than
// failing its boot) for a transfer to end.
//
// # Filenames
//
// A Handler sees a cleaned, relative name (Request.Filename): backslashes
// are separators (Windows deployment services' clients send them),
// leading slashes are dropped, "." elements and repeated slashes go, and
// a name with a ".." element, a control character, or nothing left is
// refused with error 2. DirHandler serves a directory through os.Root,
// so that no symbolic link leads out of it either.
//
// # Usage
//
//	srv := &tftp.Server{Handler: tftp.DirHandler("/srv/tftp")}
//	err := srv.ListenAndServe(ctx, "192.0.2.1:69") // until ctx ends
//
// Bind the server to the address clients send to (not 0.0.0.0): replies
// leave from a socket bound to the listener's address, and PXE ROMs
// ignore replies from another one. OnTransfer reports each transfer
// (file, bytes, duration, error) for boot-stage records and metrics.
//
// Get fetches a file the way a PXE client does, with the options a
// ClientOptions asks for; the tests and the benchmark against dnsmasq
// use it.
package tftp
