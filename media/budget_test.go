package media

import (
	"bufio"
	"bytes"
	"compress/flate"
	"context"
	"encoding/binary"
	"errors"
	"hash/adler32"
	"image"
	"image/color/palette"
	"image/gif"
	"image/jpeg"
	"image/png"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// deepPNG is a w × h PNG at 16 bits a channel (RGBA), opaque white. It compresses about a
// thousandfold, so a 7000 × 7000 one (392 MB decoded) is a file of some 400 KB: the bomb of
// issue 12, row 4.
func deepPNG(t testing.TB, w, h int) []byte {
	t.Helper()
	b, err := deepPNGBytes(w, h)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// deepPNGBytes makes the PNG without compressing 392 MB (minutes under the race detector):
// a run of identical rows is compressed once, from an empty window, and its flushed deflate
// blocks are repeated, since they refer to nothing before themselves; the zlib checksum of the
// whole is combined from the run's.
func deepPNGBytes(w, h int) ([]byte, error) {
	row := bytes.Repeat([]byte{0xff}, 1+8*w) // filter byte, then 8 bytes a pixel
	row[0] = 0                               // no filter
	run := min(h, 64)
	compress := func(rows int) ([]byte, uint32, error) {
		var buf bytes.Buffer
		fw, err := flate.NewWriter(&buf, flate.DefaultCompression)
		if err != nil {
			return nil, 0, err
		}
		sum := adler32.New()
		for range rows {
			fw.Write(row)
			sum.Write(row)
		}
		if err := fw.Flush(); err != nil { // byte-aligned, not final
			return nil, 0, err
		}
		return buf.Bytes(), sum.Sum32(), nil
	}
	block, blockSum, err := compress(run)
	if err != nil {
		return nil, err
	}
	idat := []byte{0x78, 0x9c}
	sum := uint32(1)
	for n := 0; n < h; n += run {
		if h-n < run {
			if block, blockSum, err = compress(h - n); err != nil {
				return nil, err
			}
		}
		idat = append(idat, block...)
		sum = adler32Combine(sum, blockSum, int64(min(run, h-n)*len(row)))
	}
	idat = append(idat, 0x03, 0x00) // an empty final block
	idat = binary.BigEndian.AppendUint32(idat, sum)
	out := []byte("\x89PNG\r\n\x1a\n")
	out = pngChunk(out, "IHDR", pngIHDR(w, h, 16, 6, 0))
	out = pngChunk(out, "IDAT", idat)
	return pngChunk(out, "IEND", nil), nil
}

// adler32Combine is the Adler-32 of A followed by B, from theirs and B's length (zlib's
// adler32_combine).
func adler32Combine(a, b uint32, lenB int64) uint32 {
	const base = 65521
	rem := uint64(lenB % base)
	s1 := uint64(a & 0xffff)
	s2 := rem * s1 % base
	s1 += uint64(b&0xffff) + base - 1
	s2 += uint64(a>>16) + uint64(b>>16) + base - rem
	for s1 >= base {
		s1 -= base
	}
	for s2 >= base {
		s2 -= base
	}
	return uint32(s2<<16 | s1)
}

func pngIHDR(w, h int, depth, colorType, interlace byte) []byte {
	ihdr := binary.BigEndian.AppendUint32(nil, uint32(w))
	ihdr = binary.BigEndian.AppendUint32(ihdr, uint32(h))
	return append(ihdr, depth, colorType, 0, 0, interlace)
}

// deepPNGHeader is a 16-bit RGBA PNG header claiming w × h pixels, with no pixels.
func deepPNGHeader(w, h int) []byte {
	out := []byte("\x89PNG\r\n\x1a\n")
	out = pngChunk(out, "IHDR", pngIHDR(w, h, 16, 6, 0))
	out = pngChunk(out, "IDAT", []byte{0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01})
	return pngChunk(out, "IEND", nil)
}

var bombOnce = sync.OnceValues(func() ([]byte, error) { return deepPNGBytes(7000, 7000) })

// bomb is the 7000 × 7000 16-bit PNG, made once per test binary.
func bomb(t testing.TB) []byte {
	t.Helper()
	b, err := bombOnce()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDeepPNGRefusedBeforeDecoding (issue 12, row 4): a 381 KB PNG of 7000 × 7000 pixels at 16
// bits a channel is within the pixel cap (49 M of 50 M), but its pixels would take 392 MB
// decoded: it is refused from its header, having allocated next to nothing.
func TestDeepPNGRefusedBeforeDecoding(t *testing.T) {
	// Not parallel: it measures the process's allocations.
	data := bomb(t)
	if len(data) > 500<<10 {
		t.Fatalf("the PNG is %d KB, want under 500", len(data)>>10)
	}
	t.Logf("7000x7000 16-bit PNG: %d bytes", len(data))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := thumbnail(data, DefaultMaxPixels, DefaultMaxDecodeBytes, DefaultThumbSize)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, errUndecodable) || !strings.Contains(err.Error(), "too large") {
		t.Fatalf("thumbnail: %v, want refused as too large", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
		t.Fatalf("refusing it allocated %d MiB: it was decoded", alloc>>20)
	}

	// Through the engine: the row fails, with the reason.
	clock := newFakeClock()
	c := newCDN(t, clock, map[string]http.HandlerFunc{"/deep.png": serveBytes("image/png", data)})
	e := newTestEngine(t, clock)
	res := e.Preview(context.Background(), image1(1, c.url("/deep.png")))
	if res.Outcome != Failed || !strings.Contains(res.Err, "too large") || res.Outcome.State() != StateFailed {
		t.Fatalf("%+v, want failed as too large", res)
	}
	if _, err := os.Stat(e.PreviewPath(1)); !os.IsNotExist(err) {
		t.Fatalf("a preview was stored: %v", err)
	}
}

// TestDecodeCostCoversTheDecoder: for each format the estimate is at least what the standard
// decoder really allocates (so the budget bounds memory), and not wildly more (so ordinary
// images pass). It also shows the bytes per pixel the budget counts.
func TestDecodeCostCoversTheDecoder(t *testing.T) {
	// Not parallel: it measures the process's allocations.
	const w, h = 640, 480
	px := int64(w * h)
	gray := image.NewGray(image.Rect(0, 0, w, h))
	enc := func(img image.Image) []byte {
		var buf bytes.Buffer
		if err := png.Encode(&buf, img); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	paletted := image.NewPaletted(image.Rect(0, 0, w, h), palette.Plan9)
	var gifBuf bytes.Buffer
	if err := gif.Encode(&gifBuf, paletted, nil); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		data    []byte
		perPx   float64 // the bytes per pixel the estimate should count
		decodes bool
	}{
		{"png 16-bit rgba", deepPNG(t, w, h), 8, true},
		{"png 8-bit rgba", pngBytes(t, w, h), 4, true},
		{"png 8-bit gray (counted as NRGBA: tRNS may follow)", enc(gray), 4, true},
		{"png 16-bit gray", enc(image.NewGray16(image.Rect(0, 0, w, h))), 8, true},
		{"png paletted", enc(paletted), 1, true},
		{"jpeg 4:2:0", jpegBytes(t, w, h), 1.5, true},
		{"jpeg gray", jpegGray(t, w, h), 1, true},
		{"jpeg progressive 4:2:0 (header)", progressiveHeader(w, h), 7.5, false},
		{"gif first frame", gifBuf.Bytes(), 1, true},
		{"webp lossless", solidWebP(w, h, webpColor), 8, true},
	}
	for _, c := range cases {
		cfg, format, err := image.DecodeConfig(bytes.NewReader(c.data))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		cost := decodeCost(c.data, format, cfg)
		if per := float64(cost) / float64(px); per < c.perPx || per > c.perPx*1.1 {
			t.Errorf("%s: %.2f bytes a pixel counted, want %.2f", c.name, per, c.perPx)
		}
		if !c.decodes {
			continue
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if _, _, err := image.Decode(bytes.NewReader(c.data)); err != nil {
			t.Fatalf("%s: decode: %v", c.name, err)
		}
		runtime.ReadMemStats(&after)
		// Tables, rows and readers come on top of the pixels: allow them 256 KB.
		if alloc := int64(after.TotalAlloc - before.TotalAlloc); alloc > cost+256<<10 {
			t.Errorf("%s: the decoder allocated %d bytes, the estimate is %d", c.name, alloc, cost)
		}
	}
}

func jpegGray(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewGray(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = uint8(i)
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// progressiveHeader is the start of a progressive (SOF2) 4:2:0 JPEG: enough for DecodeConfig.
func progressiveHeader(w, h int) []byte {
	b := []byte{0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10, 'J', 'F', 'I', 'F', 0, 1, 1, 0, 0, 1, 0, 1, 0, 0} // JFIF: DecodeConfig stops at the frame
	b = append(b, 0xff, 0xc2, 0x00, 0x11, 0x08)
	b = binary.BigEndian.AppendUint16(b, uint16(h))
	b = binary.BigEndian.AppendUint16(b, uint16(w))
	return append(b, 0x03, 0x01, 0x22, 0x00, 0x02, 0x11, 0x01, 0x03, 0x11, 0x01, 0xff, 0xd9)
}

// TestDecodeBudgetPeakRSS measures, in a process of its own, the peak resident memory (VmHWM)
// of the engine fetching and refusing the 16-bit bomb: issue 12 wants it under 250 MB. With
// OWED_MEDIA_RSS_UNBUDGETED=1 it measures the same without the budget, for comparison (that
// decodes the whole image: about 400 MB).
func TestDecodeBudgetPeakRSS(t *testing.T) {
	// Not parallel: it measures the process's allocations.
	if path := os.Getenv("OWED_MEDIA_RSS_CHILD"); path != "" {
		rssChild(t, path)
		return
	}
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/self/status")
	}
	if testing.Short() {
		t.Skip("spawns a process")
	}
	path := filepath.Join(t.TempDir(), "deep.png")
	if err := os.WriteFile(path, bomb(t), 0o644); err != nil {
		t.Fatal(err)
	}
	kb := peakRSS(t, path, "", Failed)
	t.Logf("peak RSS fetching and refusing the 7000x7000 16-bit PNG: %d MB (budget %d MiB)", kb/1000, DefaultMaxDecodeBytes>>20)
	if kb > 250_000 {
		t.Errorf("peak RSS %d MB, want under 250 MB", kb/1000)
	}
	if os.Getenv("OWED_MEDIA_RSS_UNBUDGETED") != "" {
		t.Logf("the same without the budget: %d MB", peakRSS(t, path, strconv.FormatInt(1<<40, 10), Cached)/1000)
		// The largest square 16-bit image the default budget admits (8 bytes a pixel, the
		// decoder's rows and the thumbnailer's buffers counted): 4059 x 4059.
		side := 1
		for n := 4096; n > 0; n-- {
			hdr := deepPNGHeader(n, n)
			cfg, format, _ := image.DecodeConfig(bytes.NewReader(hdr))
			if decodeCost(hdr, format, cfg)+thumbCost(n, n, DefaultThumbSize) <= DefaultMaxDecodeBytes {
				side = n
				break
			}
		}
		big := filepath.Join(t.TempDir(), "big.png")
		if err := os.WriteFile(big, deepPNG(t, side, side), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("peak RSS making the thumbnail of a %dx%d 16-bit PNG (just within the budget): %d MB", side, side, peakRSS(t, big, "", Cached)/1000)
	}
}

// peakRSS runs rssChild on the file at path in a new process, which checks the outcome is want,
// and returns its VmHWM in kB.
func peakRSS(t *testing.T, path, budget string, want Outcome) int64 {
	cmd := exec.Command(os.Args[0], "-test.run=^TestDecodeBudgetPeakRSS$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "OWED_MEDIA_RSS_CHILD="+path, "OWED_MEDIA_RSS_BUDGET="+budget,
		"OWED_MEDIA_RSS_WANT="+string(want))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if _, v, ok := strings.Cut(line, "VmHWM_KB="); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err == nil {
				return kb
			}
		}
	}
	t.Fatalf("child reported no peak:\n%s", out)
	return 0
}

// rssChild is the measured process: an engine fetches the file from a loopback CDN, and the
// process's peak RSS is printed.
func rssChild(t *testing.T, path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	budget := int64(0)
	if v := os.Getenv("OWED_MEDIA_RSS_BUDGET"); v != "" {
		budget, _ = strconv.ParseInt(v, 10, 64)
	}
	clock := newFakeClock()
	c := newCDN(t, clock, map[string]http.HandlerFunc{"/deep.png": serveBytes("image/png", data)})
	e := newTestEngine(t, clock, func(cfg *Config) { cfg.MaxDecodeBytes = budget })
	res := e.Preview(context.Background(), image1(1, c.url("/deep.png")))
	t.Logf("outcome %s: %s", res.Outcome, res.Err)
	// The figure must be of what it claims: a refusal, or a real decode.
	if want := Outcome(os.Getenv("OWED_MEDIA_RSS_WANT")); res.Outcome != want {
		t.Fatalf("outcome %+v, want %s", res, want)
	}
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			fmtKB := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB"))
			t.Logf("VmHWM_KB=%s", fmtKB)
		}
	}
}
