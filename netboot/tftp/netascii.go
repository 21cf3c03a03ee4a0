package tftp

import "io"

// netasciiReader encodes a byte stream as netascii (RFC 764 as RFC 1350
// uses it): LF becomes CR LF and CR becomes CR NUL. Any other byte,
// including bytes above 0x7f, passes unchanged: boot servers serve
// configuration text, and refusing a file for one stray byte would help
// nobody.
type netasciiReader struct {
	r       io.Reader
	pending int // -1, or a byte still to emit after a CR
	buf     []byte
}

func newNetasciiReader(r io.Reader) *netasciiReader {
	return &netasciiReader{r: r, pending: -1, buf: make([]byte, 4096)}
}

func (n *netasciiReader) Read(p []byte) (int, error) {
	out := 0
	if n.pending >= 0 && len(p) > 0 {
		p[0] = byte(n.pending)
		n.pending = -1
		out = 1
	}
	for out < len(p) {
		// Read at most as many bytes as could expand into what is left.
		want := (len(p) - out + 1) / 2
		if want > len(n.buf) {
			want = len(n.buf)
		}
		m, err := n.r.Read(n.buf[:want])
		for _, c := range n.buf[:m] {
			switch c {
			case '\n', '\r':
				p[out] = '\r'
				out++
				second := byte('\n')
				if c == '\r' {
					second = 0
				}
				if out < len(p) {
					p[out] = second
					out++
				} else {
					n.pending = int(second)
				}
			default:
				p[out] = c
				out++
			}
		}
		if err != nil {
			if out > 0 && err == io.EOF {
				return out, nil
			}
			return out, err
		}
		if m > 0 && out > 0 {
			// Return what we have instead of blocking for more.
			return out, nil
		}
	}
	return out, nil
}

// netasciiWriter decodes netascii for the client: CR LF becomes LF,
// CR NUL becomes CR; a CR followed by anything else is kept with it.
type netasciiWriter struct {
	w       io.Writer
	cr      bool // the last byte seen was a CR not yet written
	out     []byte
	written int64 // bytes written to w
}

func (n *netasciiWriter) Write(p []byte) (int, error) {
	n.out = n.out[:0]
	for _, c := range p {
		if n.cr {
			n.cr = false
			switch c {
			case '\n':
				n.out = append(n.out, '\n')
				continue
			case 0:
				n.out = append(n.out, '\r')
				continue
			default:
				n.out = append(n.out, '\r')
			}
		}
		if c == '\r' {
			n.cr = true
			continue
		}
		n.out = append(n.out, c)
	}
	m, err := n.w.Write(n.out)
	n.written += int64(m)
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

// flush writes a CR left at the end of the stream.
func (n *netasciiWriter) flush() error {
	if !n.cr {
		return nil
	}
	n.cr = false
	m, err := n.w.Write([]byte{'\r'})
	n.written += int64(m)
	return err
}
