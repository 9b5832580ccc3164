package owedtest

import (
	"bufio"
	"io"
	"strings"
)

// SSE is one thing a server-sent event stream sent: an event (Event, ID, Data) or a comment
// line (Comment, such as "ping").
type SSE struct {
	Event, ID, Data string
	Comment         string
}

// ReadSSE reads a stream's body until it ends, sending each event and comment in order on the
// returned channel, which is closed when the body ends; it closes body.
func ReadSSE(body io.ReadCloser) <-chan SSE {
	out := make(chan SSE, 64)
	go func() {
		defer close(out)
		defer body.Close()
		sc := bufio.NewScanner(body)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		var ev SSE
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev != (SSE{}) {
					out <- ev
				}
				ev = SSE{}
			case strings.HasPrefix(line, ":"):
				ev.Comment = strings.TrimSpace(line[1:])
			case strings.HasPrefix(line, "event: "):
				ev.Event = line[len("event: "):]
			case strings.HasPrefix(line, "id: "):
				ev.ID = line[len("id: "):]
			case strings.HasPrefix(line, "data: "):
				ev.Data = line[len("data: "):]
			}
		}
	}()
	return out
}
