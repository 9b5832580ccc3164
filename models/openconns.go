package models

import (
	"context"
	"net"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// closeWait bounds how long Store.Close waits for the store's PostgreSQL connections to end.
// pgx ends a connection that a cancelled context cut off in a goroutine of its own: it sends
// the server a cancel request on a new connection and waits for the answer. A process that
// exits meanwhile cuts the cancel request off half-way, and pgbouncer 1.18 (Debian 12's)
// crashes on a cancel request whose client leaves before its server connection is done.
const closeWait = 5 * time.Second

// openConns counts the network connections a store's pools dialled that are still open, the
// connections their cancel requests use included, so that Close can wait for them. A cancel
// request is dialled only while the connection it cancels is open, so nothing is added to a
// count of zero while Close waits.
type openConns struct{ wg sync.WaitGroup }

// dial wraps next so that each connection it makes is counted until it is closed.
func (o *openConns) dial(next pgconn.DialFunc) pgconn.DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		o.wg.Add(1)
		return &countedConn{Conn: c, closed: o.wg.Done}, nil
	}
}

// wait returns once no counted connection is open, or after d, whichever comes first.
func (o *openConns) wait(d time.Duration) {
	none := make(chan struct{})
	go func() { o.wg.Wait(); close(none) }()
	select {
	case <-none:
	case <-time.After(d):
	}
}

// countedConn is a connection that openConns counts until its first Close.
type countedConn struct {
	net.Conn
	once   sync.Once
	closed func()
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.closed)
	return err
}
