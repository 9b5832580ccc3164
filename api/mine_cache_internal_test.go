package api

import (
	"bytes"
	"fmt"
	"testing"
)

// TestMineCacheKeepsAnswersWithinItsBound: an answer comes back byte for byte under its tag;
// past the bound the least recently used go first, and the kept bytes never exceed it.
func TestMineCacheKeepsAnswersWithinItsBound(t *testing.T) {
	t.Parallel()
	c := newMineCache(256 << 10)
	body := func(i int) []byte {
		return bytes.Repeat([]byte(fmt.Sprintf(`{"items":[{"kind":"pitch","id":%d}]}`, i)), 200)
	}
	if _, ok := c.get(`"a"`); ok {
		t.Fatal("an empty cache answered")
	}
	c.put(`"0"`, body(0))
	if got, ok := c.get(`"0"`); !ok || !bytes.Equal(got, body(0)) {
		t.Fatalf("get after put: %v, %d bytes", ok, len(got))
	}
	for i := 1; i < 2000; i++ {
		c.put(fmt.Sprintf(`"%d"`, i), body(i))
		c.get(`"0"`) // kept in use: never the least recently used
		if c.size > c.max {
			t.Fatalf("after %d answers: %d bytes kept, bound %d", i+1, c.size, c.max)
		}
	}
	if _, ok := c.get(`"1"`); ok {
		t.Error("the least recently used answer was kept past the bound")
	}
	if got, ok := c.get(`"0"`); !ok || !bytes.Equal(got, body(0)) {
		t.Error("an answer in use was dropped")
	}
	if got, ok := c.get(`"1999"`); !ok || !bytes.Equal(got, body(1999)) {
		t.Error("the newest answer is not kept")
	}
	if n := c.len(); n < 10 || n >= 2000 {
		t.Errorf("%d answers kept", n)
	}
}
