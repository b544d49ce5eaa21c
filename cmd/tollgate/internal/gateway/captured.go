package gateway

import (
	"io"
	"net/http"
)

// maxCaptured bounds an upstream refusal's body kept for replaying; the
// providers read at most 64 KiB of it.
const maxCaptured = 64 << 10

// captured is an upstream's answer of 400 or more, its body kept as it is
// read.
type captured struct {
	status   int
	header   http.Header
	body     io.ReadCloser
	kept     []byte
	complete bool // read to its end, and kept whole
	over     bool
}

func (c *captured) Read(p []byte) (int, error) {
	n, err := c.body.Read(p)
	if !c.over {
		if len(c.kept)+n > maxCaptured {
			c.over, c.kept = true, nil
		} else {
			c.kept = append(c.kept, p[:n]...)
		}
	}
	if err == io.EOF && !c.over {
		c.complete = true
	}
	return n, err
}

func (c *captured) Close() error { return c.body.Close() }
