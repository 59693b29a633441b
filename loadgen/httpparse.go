package loadgen

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// respParser parses one HTTP/1.x response at a time from bytes as they arrive, without the
// header map and allocations of http.ReadResponse: the status line, then of the headers only
// Content-Length, Transfer-Encoding (chunked) and Connection. 1xx answers are skipped; 204 and
// 304 have no body; a body with neither length nor chunking runs to the end of the connection.
// Bodies are skipped, not kept. Both the blocking reader (readResponse) and the event loop
// (evloop_linux.go) use it.
type respParser struct {
	st      parseState
	code    int
	keep    bool // the connection can carry the next request
	length  int64
	chunked bool
	left    int64 // body or chunk bytes still to skip
	http10  bool
}

type parseState uint8

const (
	psStatus parseState = iota
	psHeader
	psBody      // p.left bytes of a Content-Length body
	psChunkSize // a chunk-size line
	psChunkData // p.left bytes of chunk data
	psChunkEnd  // the CRLF after a chunk's data
	psTrailer   // trailer lines up to the empty line
	psEOFBody   // a body that runs to the end of the connection
	psDone
)

// reset readies p for the next response.
func (p *respParser) reset() { *p = respParser{} }

// feed parses the start of b. It returns how many bytes it consumed and whether the response is
// complete (then p.code and p.keep hold its status and whether the connection stays usable).
// Lines are consumed whole: when b holds no complete line where one is due, feed consumes up to
// it and wants more bytes; a caller whose buffer fills with one incomplete line has a line too
// long for it.
func (p *respParser) feed(b []byte) (n int, done bool, err error) {
	for p.st != psDone {
		switch p.st {
		case psBody, psChunkData:
			k := int(min(p.left, int64(len(b)-n)))
			n += k
			p.left -= int64(k)
			if p.left > 0 {
				return n, false, nil
			}
			if p.st == psBody {
				p.st = psDone
			} else {
				p.st = psChunkEnd
			}
			continue
		case psEOFBody:
			return len(b), false, nil
		}
		i := bytes.IndexByte(b[n:], '\n')
		if i < 0 {
			return n, false, nil
		}
		line := b[n : n+i]
		n += i + 1
		if k := len(line); k > 0 && line[k-1] == '\r' {
			line = line[:k-1]
		}
		if err := p.line(line); err != nil {
			return n, false, err
		}
	}
	return n, true, nil
}

// line takes one line (without its line end) in the states that read lines.
func (p *respParser) line(line []byte) error {
	switch p.st {
	case psStatus: // "HTTP/1.1 200 OK"
		if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' ||
			(len(line) > 12 && line[12] != ' ') {
			return fmt.Errorf("%w: status line %q", errBadResponse, line)
		}
		code, err := strconv.Atoi(string(line[9:12]))
		if err != nil || code < 100 {
			return fmt.Errorf("%w: status line %q", errBadResponse, line)
		}
		p.code, p.length, p.chunked = code, -1, false
		p.http10 = line[7] == '0'
		p.keep = !p.http10 // HTTP/1.1 keeps alive unless told otherwise, 1.0 the reverse
		p.st = psHeader
	case psHeader:
		if len(line) == 0 {
			return p.endHeaders()
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 {
			return fmt.Errorf("%w: header %q", errBadResponse, line)
		}
		name, val := line[:colon], bytes.TrimSpace(line[colon+1:])
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			n, err := strconv.ParseInt(string(val), 10, 64)
			if err != nil || n < 0 || (p.length >= 0 && n != p.length) {
				return fmt.Errorf("%w: content-length %q", errBadResponse, val)
			}
			p.length = n
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			p.chunked = bytes.EqualFold(val, []byte("chunked"))
			if !p.chunked && !bytes.EqualFold(val, []byte("identity")) {
				return fmt.Errorf("%w: transfer-encoding %q", errBadResponse, val)
			}
		case bytes.EqualFold(name, []byte("Connection")):
			for tok := range bytes.SplitSeq(val, []byte(",")) {
				switch tok = bytes.TrimSpace(tok); {
				case bytes.EqualFold(tok, []byte("close")):
					p.keep = false
				case bytes.EqualFold(tok, []byte("keep-alive")):
					p.keep = p.keep || p.http10
				}
			}
		}
	case psChunkSize: // "1a;ext=v"
		if i := bytes.IndexByte(line, ';'); i >= 0 {
			line = line[:i]
		}
		line = bytes.TrimSpace(line)
		size, err := strconv.ParseUint(string(line), 16, 63)
		if err != nil || len(line) == 0 {
			return fmt.Errorf("%w: chunk size %q", errBadResponse, line)
		}
		if size == 0 {
			p.st = psTrailer
		} else {
			p.st, p.left = psChunkData, int64(size)
		}
	case psChunkEnd:
		if len(line) != 0 {
			return fmt.Errorf("%w: %d bytes after a chunk's data", errBadResponse, len(line))
		}
		p.st = psChunkSize
	case psTrailer:
		if len(line) == 0 {
			p.st = psDone
		}
	}
	return nil
}

// endHeaders chooses how the body is framed once the headers are read.
func (p *respParser) endHeaders() error {
	switch {
	case p.code == 101:
		return fmt.Errorf("%w: unexpected 101", errBadResponse)
	case p.code < 200:
		p.st = psStatus // 1xx: the real answer follows
	case p.code == 204 || p.code == 304:
		p.st = psDone
	case p.chunked: // takes precedence over Content-Length (RFC 9112 6.3)
		p.st = psChunkSize
	case p.length > 0:
		p.st, p.left = psBody, p.length
	case p.length == 0:
		p.st = psDone
	default:
		p.st, p.keep = psEOFBody, false
	}
	return nil
}

// eof tells p that the connection ended; it reports whether that completed the response (a
// body that runs to the end of the connection) or cut it short (io.ErrUnexpectedEOF).
func (p *respParser) eof() error {
	if p.st == psEOFBody {
		p.st = psDone
		return nil
	}
	return io.ErrUnexpectedEOF
}

// readResponse reads one response from br with a respParser and discards its body. keep tells
// whether the connection can carry the next request.
func readResponse(br *bufio.Reader) (code int, keep bool, err error) {
	var p respParser
	for need := 1; ; need = br.Buffered() + 1 { // at least one byte more than the parser left
		_, perr := br.Peek(need)
		switch {
		case errors.Is(perr, bufio.ErrBufferFull):
			return 0, false, fmt.Errorf("%w: line longer than %d bytes", errBadResponse, br.Size())
		case perr != nil && perr != io.EOF:
			return 0, false, perr
		}
		buf, _ := br.Peek(br.Buffered())
		n, done, err := p.feed(buf)
		_, _ = br.Discard(n)
		switch {
		case err != nil:
			return 0, false, err
		case done:
			return p.code, p.keep, nil
		case perr == io.EOF:
			if err := p.eof(); err != nil {
				return 0, false, err
			}
			return p.code, p.keep, nil
		}
	}
}
