package api

import (
	"bytes"
	lru "container/list"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// mineCacheBytes bounds the answers of `mine` kept in memory, compressed. A view of 100 items
// is about 20 KB of JSON and 1.3 KB compressed, so 32 MiB keeps the last twenty thousand or so.
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
	tag    string
	packed []byte // the answer, compressed
}

func newMineCache(max int64) *mineCache {
	return &mineCache{max: max, ll: lru.New(), byTag: map[string]*lru.Element{}}
}

// The answers are compressed by zstd at its fastest level: on the view's JSON it packs a third
// tighter than deflate's fastest, three times as fast, and unpacks five times as fast
// (docs/benchmarks.md), and a first view pays for the packing; without a checksum, as the
// answers never leave the process's memory (a tenth faster both ways). One encoder and one decoder
// serve every request: their EncodeAll and DecodeAll may be called at once.
var (
	packer, _   = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithLowerEncoderMem(true), zstd.WithEncoderCRC(false))
	unpacker, _ = zstd.NewReader(nil, zstd.WithDecoderMaxMemory(mineCacheBytes))
	scratches   = sync.Pool{New: func() any { b := make([]byte, 0, 8<<10); return &b }}
)

// get appends to dst the answer kept under tag, if any.
func (c *mineCache) get(tag string, dst []byte) ([]byte, bool) {
	c.mu.Lock()
	e, ok := c.byTag[tag]
	var packed []byte
	if ok {
		c.ll.MoveToFront(e)
		packed = e.Value.(*mineCached).packed
	}
	c.mu.Unlock()
	if !ok {
		return nil, false
	}
	body, err := unpacker.DecodeAll(packed, dst)
	return body, err == nil
}

// put keeps body under tag, dropping the least recently used answers past the bound.
func (c *mineCache) put(tag string, body []byte) {
	scratch := scratches.Get().(*[]byte)
	defer scratches.Put(scratch)
	*scratch = packer.EncodeAll(body, (*scratch)[:0])
	if int64(len(*scratch)) > c.max/16 {
		return
	}
	packed := bytes.Clone(*scratch) // kept at its size, not the scratch's
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byTag[tag]; ok {
		return
	}
	c.byTag[tag] = c.ll.PushFront(&mineCached{tag: tag, packed: packed})
	c.size += int64(len(packed) + len(tag) + 64)
	for c.size > c.max {
		e := c.ll.Back()
		old := e.Value.(*mineCached)
		c.ll.Remove(e)
		delete(c.byTag, old.tag)
		c.size -= int64(len(old.packed) + len(old.tag) + 64)
	}
}

// len is how many answers are kept.
func (c *mineCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}
