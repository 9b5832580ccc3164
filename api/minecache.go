package api

import (
	"bytes"
	"compress/flate"
	lru "container/list"
	"io"
	"sync"
)

// mineCacheBytes bounds the answers of `mine` kept in memory, compressed. A view of 100 items
// is about 20 KB of JSON and 2-3 KB compressed, so 32 MiB keeps the last ten thousand or so.
const mineCacheBytes = 32 << 20

// mineCache keeps recent answers of the author's view by ETag, compressed, least recently used
// first out. An ETag names one view: the author, their limit, the filters and page, and the
// version read from the database (which every replica reads alike), and a version never comes
// back once the view has changed (ids and attempts only grow), so an answer kept under a tag
// is the answer to that tag for as long as anyone can still be given it. It spares a repeated
// view (a client without the tag, another device, a reconnecting stream) the item reads and
// the JSON, which are most of a 200's cost.
type mineCache struct {
	mu    sync.Mutex
	max   int64
	size  int64
	ll    *lru.List // front: most recently used
	byTag map[string]*lru.Element
}

type mineCached struct {
	tag  string
	flat []byte // the answer, deflated
}

func newMineCache(max int64) *mineCache {
	return &mineCache{max: max, ll: lru.New(), byTag: map[string]*lru.Element{}}
}

var (
	deflaters = sync.Pool{New: func() any { w, _ := flate.NewWriter(nil, flate.BestSpeed); return w }}
	inflaters = sync.Pool{New: func() any { return flate.NewReader(bytes.NewReader(nil)) }}
)

// get is the answer kept under tag, if any.
func (c *mineCache) get(tag string) ([]byte, bool) {
	c.mu.Lock()
	e, ok := c.byTag[tag]
	var flat []byte
	if ok {
		c.ll.MoveToFront(e)
		flat = e.Value.(*mineCached).flat
	}
	c.mu.Unlock()
	if !ok {
		return nil, false
	}
	r := inflaters.Get().(io.ReadCloser)
	defer inflaters.Put(r)
	if err := r.(flate.Resetter).Reset(bytes.NewReader(flat), nil); err != nil {
		return nil, false
	}
	body, err := io.ReadAll(r)
	return body, err == nil
}

// put keeps body under tag, dropping the least recently used answers past the bound.
func (c *mineCache) put(tag string, body []byte) {
	var buf bytes.Buffer
	buf.Grow(len(body) / 6)
	w := deflaters.Get().(*flate.Writer)
	w.Reset(&buf)
	_, err := w.Write(body)
	if err == nil {
		err = w.Close()
	}
	deflaters.Put(w)
	if err != nil || int64(buf.Len()) > c.max/16 {
		return
	}
	flat := bytes.Clone(buf.Bytes())
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byTag[tag]; ok {
		return
	}
	c.byTag[tag] = c.ll.PushFront(&mineCached{tag: tag, flat: flat})
	c.size += int64(len(flat) + len(tag) + 64)
	for c.size > c.max {
		e := c.ll.Back()
		old := e.Value.(*mineCached)
		c.ll.Remove(e)
		delete(c.byTag, old.tag)
		c.size -= int64(len(old.flat) + len(old.tag) + 64)
	}
}

// len is how many answers are kept.
func (c *mineCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}
