package loadgen

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http/httputil"
	"strconv"
)

// readResponse reads one HTTP/1.x response from br and discards its body, without the header
// map and allocations of http.ReadResponse: the status line, then of the headers only
// Content-Length, Transfer-Encoding (chunked) and Connection. 1xx answers are skipped; 204 and
// 304 have no body; a body with neither length nor chunking runs to the end of the connection.
// keep tells whether the connection can carry the next request.
func readResponse(br *bufio.Reader) (code int, keep bool, err error) {
	for {
		line, err := readLine(br)
		if err != nil {
			return 0, false, err
		}
		// "HTTP/1.1 200 OK"
		if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' ||
			(len(line) > 12 && line[12] != ' ') {
			return 0, false, fmt.Errorf("%w: status line %q", errBadResponse, line)
		}
		code, err = strconv.Atoi(string(line[9:12]))
		if err != nil || code < 100 {
			return 0, false, fmt.Errorf("%w: status line %q", errBadResponse, line)
		}
		keep = line[7] != '0' // HTTP/1.1 keeps alive unless told otherwise, 1.0 the reverse
		length, chunked := int64(-1), false
		for {
			h, err := readLine(br)
			if err != nil {
				return 0, false, err
			}
			if len(h) == 0 {
				break
			}
			colon := bytes.IndexByte(h, ':')
			if colon <= 0 {
				return 0, false, fmt.Errorf("%w: header %q", errBadResponse, h)
			}
			name, val := h[:colon], bytes.TrimSpace(h[colon+1:])
			switch {
			case bytes.EqualFold(name, []byte("Content-Length")):
				n, err := strconv.ParseInt(string(val), 10, 64)
				if err != nil || n < 0 || (length >= 0 && n != length) {
					return 0, false, fmt.Errorf("%w: content-length %q", errBadResponse, val)
				}
				length = n
			case bytes.EqualFold(name, []byte("Transfer-Encoding")):
				chunked = bytes.EqualFold(val, []byte("chunked"))
				if !chunked && !bytes.EqualFold(val, []byte("identity")) {
					return 0, false, fmt.Errorf("%w: transfer-encoding %q", errBadResponse, val)
				}
			case bytes.EqualFold(name, []byte("Connection")):
				for tok := range bytes.SplitSeq(val, []byte(",")) {
					switch tok = bytes.TrimSpace(tok); {
					case bytes.EqualFold(tok, []byte("close")):
						keep = false
					case bytes.EqualFold(tok, []byte("keep-alive")):
						keep = keep || line[7] == '0'
					}
				}
			}
		}
		switch {
		case code == 101:
			return 0, false, fmt.Errorf("%w: unexpected 101", errBadResponse)
		case code < 200:
			continue // 1xx: the real answer follows
		case code == 204 || code == 304:
			return code, keep, nil
		case chunked: // takes precedence over Content-Length (RFC 9112 6.3)
			if _, err := io.Copy(io.Discard, httputil.NewChunkedReader(br)); err != nil {
				return 0, false, err
			}
			for { // trailers, up to the empty line
				t, err := readLine(br)
				if err != nil {
					return 0, false, err
				}
				if len(t) == 0 {
					return code, keep, nil
				}
			}
		case length >= 0:
			if _, err := br.Discard(int(length)); err != nil {
				return 0, false, unexpectedEOF(err)
			}
			return code, keep, nil
		default:
			if _, err := io.Copy(io.Discard, br); err != nil {
				return 0, false, err
			}
			return code, false, nil
		}
	}
}

// readLine returns the next line of br without its CRLF (or LF); valid until br's next read.
func readLine(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, fmt.Errorf("%w: line longer than %d bytes", errBadResponse, br.Size())
		}
		return nil, unexpectedEOF(err)
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, nil
}

func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
