package media

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"hash/adler32"
	"image"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// The very wide, very short PNG of issue 23: 3,352,410 × 10 pixels, 8-bit RGB, about 137 KB.
const wideW, wideH = 3_352_410, 10

// widePNGBytes is a w × h 8-bit RGB PNG, white, made as deepPNGBytes makes its bomb.
func widePNGBytes(w, h int) ([]byte, error) {
	row := bytes.Repeat([]byte{0xff}, 1+3*w)
	row[0] = 0
	var buf bytes.Buffer
	buf.Write([]byte{0x78, 0x9c})
	fw, err := flate.NewWriter(&buf, flate.BestSpeed)
	if err != nil {
		return nil, err
	}
	sum := adler32.New()
	for range h {
		fw.Write(row)
		sum.Write(row)
	}
	if err := fw.Close(); err != nil {
		return nil, err
	}
	idat := binary.BigEndian.AppendUint32(buf.Bytes(), sum.Sum32())
	out := []byte("\x89PNG\r\n\x1a\n")
	out = pngChunk(out, "IHDR", pngIHDR(w, h, 8, 2, 0))
	out = pngChunk(out, "IDAT", idat)
	return pngChunk(out, "IEND", nil), nil
}

// widestAdmitted is the width of the widest 10-pixel-high 8-bit RGB PNG the default budget
// admits, thumbnailer included.
func widestAdmitted() int {
	lo, hi := 1, wideW
	for lo < hi {
		mid := (lo + hi + 1) / 2
		hdr := pngIHDRFile(mid, wideH)
		cfg, format, _ := image.DecodeConfig(bytes.NewReader(hdr))
		if decodeCost(hdr, format, cfg)+thumbCost(mid, wideH, DefaultThumbSize) <= DefaultMaxDecodeBytes {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// pngIHDRFile is the start of an 8-bit RGB PNG of w × h: enough for DecodeConfig.
func pngIHDRFile(w, h int) []byte {
	return pngChunk([]byte("\x89PNG\r\n\x1a\n"), "IHDR", pngIHDR(w, h, 8, 2, 0))
}

// TestWidePNGCountsTheThumbnailer (issue 23): the budget counts what the thumbnailer and the
// PNG decoder's rows take besides the pixels. The 3,352,410 × 10 PNG (134 MB of pixels, just
// under the 128 MiB budget alone; 20 MB of rows and the thumbnailer's buffers on top) is
// refused before decoding, having allocated next to nothing; and a wide image the budget does
// admit is shrunk through a strip of at most 1 MiB, into a copy about twice the thumbnail, not
// one as long as the image.
func TestWidePNGCountsTheThumbnailer(t *testing.T) {
	// Not parallel: it measures the process's allocations.
	data, err := widePNGBytes(wideW, wideH)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the %d x %d PNG is %d KB", wideW, wideH, len(data)>>10)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = thumbnail(data, DefaultMaxPixels, DefaultMaxDecodeBytes, DefaultThumbSize)
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "too large to decode") {
		t.Fatalf("the wide PNG: %v, want refused as too large to decode", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
		t.Errorf("refusing it allocated %d MB", alloc>>20)
	}

	// The thumbnailer's own buffers for a wide image it makes: the shrunk copy and the strip.
	const w, h = 400_000, 10
	tw, th := fit(w, h, DefaultThumbSize)
	kx, ky := shrinkFactors(w, h, tw, th)
	src := image.NewRGBA(image.Rect(0, 0, w, h))
	runtime.ReadMemStats(&before)
	small := boxShrink(src, kx, ky)
	runtime.ReadMemStats(&after)
	if b := small.Bounds(); b.Dx() > 2*tw+1 || b.Dy() > 2*th+1 {
		t.Errorf("a %d x %d image was box-shrunk to %v for a %d x %d thumbnail", w, h, b, tw, th)
	}
	if alloc := int64(after.TotalAlloc - before.TotalAlloc); alloc > thumbCost(w, h, DefaultThumbSize) || alloc > 2*stripBytes {
		t.Errorf("box-shrinking allocated %d bytes; thumbCost counts %d", alloc, thumbCost(w, h, DefaultThumbSize))
	}
}

// TestWidePNGPeakRSS measures, in a process of its own as TestDecodeBudgetPeakRSS does, the
// peak resident memory of the engine given the 3,352,410 × 10 PNG (refused) and the widest
// 10-pixel-high PNG the budget admits (thumbnailed): both under the 151 MB the docs give for
// the largest image the budget admits. (Before the thumbnailer was counted the first was
// cached at a peak of 299 MB.)
func TestWidePNGPeakRSS(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/self/status")
	}
	if testing.Short() {
		t.Skip("spawns a process")
	}
	if raceDetector {
		t.Skip("the race detector multiplies resident memory: run without -race (as .ci/run does)")
	}
	for _, c := range []struct {
		w    int
		want Outcome
	}{{wideW, Failed}, {widestAdmitted(), Cached}} {
		data, err := widePNGBytes(c.w, wideH)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "wide.png")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		kb := peakRSS(t, path, "", c.want)
		t.Logf("peak RSS for the %d x %d PNG (%s): %d MB", c.w, wideH, c.want, kb/1000)
		if kb > 151_000 {
			t.Errorf("%d x %d: peak RSS %d MB, want at most 151 MB", c.w, wideH, kb/1000)
		}
	}
	if os.Getenv("OWED_MEDIA_RSS_UNBUDGETED") != "" {
		data, _ := widePNGBytes(wideW, wideH)
		path := filepath.Join(t.TempDir(), "wide.png")
		os.WriteFile(path, data, 0o600)
		t.Logf("the %d x %d PNG without the budget: %d MB", wideW, wideH, peakRSS(t, path, "1099511627776", Cached)/1000)
	}
}
