package tftp

import (
	"context"
	"errors"
	"io"
	"net/netip"
	"time"
)

// Request is a read request as the server accepted it.
type Request struct {
	// Filename is the name the client asked for, cleaned: no leading
	// slash, no "." or ".." elements (a request that climbs out of the
	// root is refused before a Handler sees it).
	Filename string
	// Remote is the client's address; Local is the server address the
	// request came to.
	Remote netip.AddrPort
	Local  netip.AddrPort
	// Options are the options the client asked for (lower-case names).
	Options map[string]string
}

// File is what a Handler opens: read at offsets (a lost block is sent
// again), with a known size (tsize).
type File interface {
	io.ReaderAt
	io.Closer
	Size() int64
}

// Handler opens the file a read request names. It returns an error
// wrapping ErrNotFound or ErrAccess for TFTP's error codes 1 and 2; any
// other error is sent as code 0 with a generic message (its text is
// logged, not sent).
type Handler interface {
	OpenTFTP(ctx context.Context, r *Request) (File, error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, r *Request) (File, error)

// OpenTFTP calls f(ctx, r).
func (f HandlerFunc) OpenTFTP(ctx context.Context, r *Request) (File, error) { return f(ctx, r) }

// Errors a Handler wraps to choose the TFTP error code.
var (
	ErrNotFound = errors.New("tftp: file not found")
	ErrAccess   = errors.New("tftp: access violation")
)

// Transfer is one finished (or failed) transfer, for the server's
// OnTransfer callback: stage records and metrics.
type Transfer struct {
	Request   Request
	Bytes     int64
	Duration  time.Duration
	BlockSize int
	// Err is nil for a transfer the client acknowledged to the end.
	Err error
}
