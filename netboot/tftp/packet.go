package tftp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Opcodes of RFC 1350 and RFC 2347.
const (
	opRRQ   uint16 = 1
	opWRQ   uint16 = 2
	opDATA  uint16 = 3
	opACK   uint16 = 4
	opERROR uint16 = 5
	opOACK  uint16 = 6
)

// ErrorCode is a TFTP error code (RFC 1350 section 5, RFC 2347).
type ErrorCode uint16

// The error codes a TFTP ERROR packet carries.
const (
	ErrCodeUndefined     ErrorCode = 0 // not defined, see the message
	ErrCodeNotFound      ErrorCode = 1 // file not found
	ErrCodeAccess        ErrorCode = 2 // access violation
	ErrCodeDiskFull      ErrorCode = 3 // disk full or allocation exceeded
	ErrCodeIllegal       ErrorCode = 4 // illegal TFTP operation
	ErrCodeUnknownTID    ErrorCode = 5 // unknown transfer ID
	ErrCodeFileExists    ErrorCode = 6 // file already exists
	ErrCodeNoSuchUser    ErrorCode = 7 // no such user
	ErrCodeOptionRefused ErrorCode = 8 // option negotiation refused (RFC 2347)
)

// RemoteError is an ERROR packet the peer sent: the client returns it
// when the server refuses a transfer, and the server reports it in
// Transfer.Err when the client aborts one.
type RemoteError struct {
	Code    ErrorCode
	Message string
}

func (e *RemoteError) Error() string {
	return fmt.Sprintf("tftp: peer sent error %d: %q", e.Code, e.Message)
}

// Limits on what the server accepts in a request.
const (
	// maxRequestSize is the largest RRQ accepted: RFC 2347 keeps a
	// request with its options within 512 bytes.
	maxRequestSize = 512
	// maxOptions bounds the options of one request.
	maxOptions = 16
	// Block sizes of RFC 2348.
	minBlockSize = 8
	maxBlockSize = 65464
	// defaultBlockSize is RFC 1350's fixed block size.
	defaultBlockSize = 512
	// maxWindowSize is RFC 7440's upper bound.
	maxWindowSize = 65535
)

// errMalformed is wrapped by every parse failure of a packet.
var errMalformed = errors.New("tftp: malformed packet")

// request is a parsed RRQ or WRQ.
type request struct {
	op       uint16
	filename string
	mode     string // lower case
	options  map[string]string
	order    []string // option names in the order the client sent them
}

// parseRequest parses an RRQ or WRQ packet: the opcode, then
// NUL-terminated filename, mode and option name/value pairs. Option
// names and the mode are case-insensitive (RFC 1350, RFC 2347) and
// returned in lower case; a repeated option name is malformed.
func parseRequest(p []byte) (*request, error) {
	if len(p) > maxRequestSize {
		return nil, fmt.Errorf("%w: request of %d bytes exceeds %d", errMalformed, len(p), maxRequestSize)
	}
	if len(p) < 2 {
		return nil, fmt.Errorf("%w: %d bytes, no opcode", errMalformed, len(p))
	}
	op := binary.BigEndian.Uint16(p)
	if op != opRRQ && op != opWRQ {
		return nil, fmt.Errorf("%w: opcode %d is not a request", errMalformed, op)
	}
	fields, err := splitNUL(p[2:])
	if err != nil {
		return nil, err
	}
	if len(fields) < 2 {
		return nil, fmt.Errorf("%w: request has no filename and mode", errMalformed)
	}
	if len(fields)%2 != 0 {
		return nil, fmt.Errorf("%w: option %q has no value", errMalformed, fields[len(fields)-1])
	}
	if (len(fields)-2)/2 > maxOptions {
		return nil, fmt.Errorf("%w: %d options exceed %d", errMalformed, (len(fields)-2)/2, maxOptions)
	}
	r := &request{op: op, filename: fields[0], mode: strings.ToLower(fields[1])}
	if r.filename == "" {
		return nil, fmt.Errorf("%w: empty filename", errMalformed)
	}
	for i := 2; i < len(fields); i += 2 {
		name := strings.ToLower(fields[i])
		if name == "" {
			return nil, fmt.Errorf("%w: empty option name", errMalformed)
		}
		if r.options == nil {
			r.options = make(map[string]string)
		}
		if _, dup := r.options[name]; dup {
			return nil, fmt.Errorf("%w: option %q repeated", errMalformed, name)
		}
		r.options[name] = fields[i+1]
		r.order = append(r.order, name)
	}
	return r, nil
}

// splitNUL splits b into NUL-terminated strings; b must end in NUL.
func splitNUL(b []byte) ([]string, error) {
	if len(b) == 0 || b[len(b)-1] != 0 {
		return nil, fmt.Errorf("%w: last field not NUL-terminated", errMalformed)
	}
	var out []string
	for len(b) > 0 {
		i := bytes.IndexByte(b, 0)
		out = append(out, string(b[:i]))
		b = b[i+1:]
	}
	return out, nil
}

// encodeRequest builds an RRQ; options are written in the order of names.
func encodeRequest(op uint16, filename, mode string, names []string, opts map[string]string) []byte {
	b := binary.BigEndian.AppendUint16(nil, op)
	b = append(append(b, filename...), 0)
	b = append(append(b, mode...), 0)
	for _, n := range names {
		b = append(append(b, n...), 0)
		b = append(append(b, opts[n]...), 0)
	}
	return b
}

// encodeOACK builds an OACK with the options in names' order.
func encodeOACK(names []string, opts map[string]string) []byte {
	b := binary.BigEndian.AppendUint16(nil, opOACK)
	for _, n := range names {
		b = append(append(b, n...), 0)
		b = append(append(b, opts[n]...), 0)
	}
	return b
}

// encodeError builds an ERROR packet.
func encodeError(code ErrorCode, msg string) []byte {
	b := binary.BigEndian.AppendUint16(nil, opERROR)
	b = binary.BigEndian.AppendUint16(b, uint16(code))
	return append(append(b, msg...), 0)
}

// encodeACK builds an ACK of block.
func encodeACK(block uint16) []byte {
	b := binary.BigEndian.AppendUint16(nil, opACK)
	return binary.BigEndian.AppendUint16(b, block)
}

// packet is a parsed DATA, ACK, ERROR or OACK: what a transfer's peer
// sends after the request.
type packet struct {
	op      uint16
	block   uint16            // DATA and ACK
	data    []byte            // DATA payload, aliasing the input
	code    ErrorCode         // ERROR
	message string            // ERROR
	options map[string]string // OACK, lower-case names
}

// parsePacket parses a packet of a running transfer. maxData bounds a
// DATA payload (the negotiated block size).
func parsePacket(p []byte, maxData int) (*packet, error) {
	if len(p) < 2 {
		return nil, fmt.Errorf("%w: %d bytes, no opcode", errMalformed, len(p))
	}
	pk := &packet{op: binary.BigEndian.Uint16(p)}
	switch pk.op {
	case opDATA, opACK:
		if len(p) < 4 {
			return nil, fmt.Errorf("%w: opcode %d in %d bytes", errMalformed, pk.op, len(p))
		}
		pk.block = binary.BigEndian.Uint16(p[2:])
		if pk.op == opACK {
			// Trailing bytes after an ACK are tolerated (some stacks pad).
			return pk, nil
		}
		pk.data = p[4:]
		if len(pk.data) > maxData {
			return nil, fmt.Errorf("%w: DATA of %d bytes exceeds block size %d", errMalformed, len(pk.data), maxData)
		}
	case opERROR:
		if len(p) < 4 {
			return nil, fmt.Errorf("%w: ERROR in %d bytes", errMalformed, len(p))
		}
		pk.code = ErrorCode(binary.BigEndian.Uint16(p[2:]))
		msg := p[4:]
		if i := bytes.IndexByte(msg, 0); i >= 0 {
			msg = msg[:i]
		}
		if len(msg) > 255 {
			msg = msg[:255]
		}
		pk.message = strings.ToValidUTF8(string(msg), "?")
	case opOACK:
		fields, err := splitNUL(p[2:])
		if err != nil {
			return nil, err
		}
		if len(fields)%2 != 0 {
			return nil, fmt.Errorf("%w: OACK option %q has no value", errMalformed, fields[len(fields)-1])
		}
		if len(fields)/2 > maxOptions {
			return nil, fmt.Errorf("%w: OACK with %d options exceeds %d", errMalformed, len(fields)/2, maxOptions)
		}
		pk.options = make(map[string]string, len(fields)/2)
		for i := 0; i < len(fields); i += 2 {
			name := strings.ToLower(fields[i])
			if _, dup := pk.options[name]; dup {
				return nil, fmt.Errorf("%w: OACK option %q repeated", errMalformed, name)
			}
			pk.options[name] = fields[i+1]
		}
	default:
		return nil, fmt.Errorf("%w: unexpected opcode %d", errMalformed, pk.op)
	}
	return pk, nil
}

// parseUint parses an option value: decimal digits only, within [lo, hi].
func parseUint(s string, lo, hi int64) (int64, bool) {
	if s == "" || len(s) > 20 {
		return 0, false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < lo || v > hi {
		return 0, false
	}
	return v, true
}
