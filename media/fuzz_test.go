package media

import (
	"bytes"
	"image"
	"net/http"
	"os"
	"runtime"
	"testing"
	"time"
)

// FuzzRetryAfter feeds arbitrary Retry-After headers and 429 bodies to the engine's reader of
// the wait a rate limit asks for: it must not panic, and a wait it accepts is never negative
// (the caller caps it at MaxRateLimitWait).
func FuzzRetryAfter(f *testing.F) {
	f.Add("7", []byte(nil))
	f.Add("1.5", []byte(nil))
	f.Add("Wed, 21 Oct 2015 07:28:00 GMT", []byte(nil))
	f.Add("Sun, 06 Nov 2067 08:49:37 GMT", []byte(nil))
	f.Add("", []byte(`{"message":"You are being rate limited.","retry_after":0.512,"global":false}`))
	f.Add("soon", []byte(`{"retry_after":-4}`))
	f.Add("NaN", []byte(`{"retry_after":1e309}`))
	f.Add("-1", []byte(`{"retry_after":"5"}`))
	f.Add("1e300", []byte(nil))
	f.Add("0x1p-2", []byte(`[{"retry_after":1}]`))
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, header string, body []byte) {
		h := http.Header{}
		if header != "" {
			h.Set("Retry-After", header)
		}
		d, ok := retryAfter(h, body, now)
		if d < 0 || (!ok && d != 0) {
			t.Fatalf("retryAfter(%q, %q) = %v, %v", header, body, d, ok)
		}
	})
}

// FuzzThumbnailMemory feeds arbitrary bytes to the decoder chain with a pixel cap and a decode
// budget, and measures what one call allocates: an image that claims more pixels than the cap,
// or pixels that would take more memory than the budget once decoded, is refused before its
// pixels are decoded, so no input, however small, makes the engine allocate more than a small
// multiple of the budget. Whatever is accepted really is within both.
func FuzzThumbnailMemory(f *testing.F) {
	for _, data := range fuzzSeeds(f) {
		f.Add(data)
	}
	if webp, err := os.ReadFile(webpFixture); err == nil {
		f.Add(webp)
	}
	f.Add(hugePNGHeader(1<<16-1, 1<<16-1))
	f.Add(hugePNGHeader(1025, 1024))
	f.Add(hugePNGHeader(1024, 1024))
	f.Add(deepPNGHeader(1000, 1000))
	f.Add(deepPNGHeader(700, 700))
	f.Add([]byte("GIF89a\xff\xff\xff\xff\x00\x00\x00,\x00\x00\x00\x00\xff\xff\xff\xff\x00\x02\x02D\x01\x00;"))
	f.Add([]byte("\xff\xd8\xff\xc0\x00\x11\x08\xff\xff\xff\xff\x03\x01\x22\x00\x02\x11\x01\x03\x11\x01\xff\xd9"))
	f.Add([]byte("\xff\xd8\xff\xc2\x00\x11\x08\x04\x00\x04\x00\x03\x01\x11\x00\x02\x11\x01\x03\x11\x01\xff\xd9"))
	const maxPixels, maxDecode, size = 1 << 20, 4 << 20, 64
	f.Fuzz(func(t *testing.T, data []byte) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		out, err := thumbnail(data, maxPixels, maxDecode, size)
		runtime.ReadMemStats(&after)
		// The budget covers the decoded pixels and the decoder's buffers of their order; rows,
		// tables, the thumbnail and its encoding are small beside them.
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 3*maxDecode+64*uint64(len(data))+8<<20 {
			t.Fatalf("one thumbnail of %d bytes allocated %d MiB (err %v)", len(data), alloc>>20, err)
		}
		if err != nil {
			return
		}
		cfg, format, cerr := image.DecodeConfig(bytes.NewReader(data))
		if cerr != nil || int64(cfg.Width)*int64(cfg.Height) > maxPixels {
			t.Fatalf("accepted an image of %dx%d (%v) past the cap of %d pixels", cfg.Width, cfg.Height, cerr, maxPixels)
		}
		if cost := decodeCost(data, format, cfg); cost > maxDecode {
			t.Fatalf("accepted a %s of %dx%d costing %d bytes, past the budget of %d", format, cfg.Width, cfg.Height, cost, maxDecode)
		}
		if len(out) == 0 {
			t.Fatal("accepted with an empty thumbnail")
		}
	})
}
