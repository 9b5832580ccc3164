package media

import (
	"bytes"
	"errors"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/image/draw"
)

func TestFit(t *testing.T) {
	t.Parallel()
	cases := []struct{ w, h, size, ww, wh int }{
		{640, 480, 320, 320, 240},
		{480, 640, 320, 240, 320},
		{320, 320, 320, 320, 320},
		{100, 50, 320, 100, 50},
		{10000, 1, 320, 320, 1},
		{1, 10000, 320, 1, 320},
		{600, 400, 320, 320, 213},
	}
	for _, c := range cases {
		if w, h := fit(c.w, c.h, c.size); w != c.ww || h != c.wh {
			t.Errorf("fit(%d, %d, %d) = %dx%d, want %dx%d", c.w, c.h, c.size, w, h, c.ww, c.wh)
		}
	}
}

func TestThumbnailErrorsAreUndecodable(t *testing.T) {
	t.Parallel()
	for name, data := range map[string][]byte{
		"garbage": []byte("nope"),
		"bomb":    hugePNGHeader(100000, 100000),
		"zero":    hugePNGHeader(0, 10),
	} {
		if _, err := thumbnail(data, DefaultMaxPixels, DefaultMaxDecodeBytes, 320); !errors.Is(err, errUndecodable) {
			t.Errorf("%s: %v, want errUndecodable", name, err)
		}
	}
}

func TestBoxShrinkAverages(t *testing.T) {
	t.Parallel()
	src := image.NewNRGBA(image.Rect(10, 20, 15, 24)) // odd width: the last column is dropped
	for y := 20; y < 24; y++ {
		for x := 10; x < 15; x++ {
			src.SetNRGBA(x, y, color.NRGBA{R: uint8(40 * (x - 10)), G: uint8(50 * (y - 20)), B: 200, A: 0xff})
		}
	}
	// The top-left pixel of the top-right block is transparent: it adds no colour.
	src.SetNRGBA(12, 20, color.NRGBA{})
	got := boxShrink(src, 2, 2)
	if got.Bounds() != image.Rect(0, 0, 2, 2) {
		t.Fatalf("bounds %v", got.Bounds())
	}
	want := []color.RGBA{
		{R: 20, G: 25, B: 200, A: 255}, {R: 80, G: 25, B: 150, A: 191},
		{R: 20, G: 125, B: 200, A: 255}, {R: 100, G: 125, B: 200, A: 255},
	}
	for i, w := range want {
		if c := got.RGBAAt(i%2, i/2); c != w {
			t.Errorf("block %d = %v, want %v", i, c, w)
		}
	}
}

// The block-average shortcut must look like scaling the whole image directly.
func TestThumbnailShortcutMatchesDirectScale(t *testing.T) {
	t.Parallel()
	const w, h, tw, th = 480, 360, 80, 60 // a 3x3 block average, then a 2x scale
	src := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			a := uint8(0xff)
			if x > w*3/4 {
				a = 0x40
			}
			src.SetNRGBA(x, y, color.NRGBA{R: uint8(x / 2), G: uint8(y / 2), B: uint8((x + y) / 4), A: a})
		}
	}
	var in bytes.Buffer
	if err := png.Encode(&in, src); err != nil {
		t.Fatal(err)
	}
	out, err := thumbnail(in.Bytes(), DefaultMaxPixels, DefaultMaxDecodeBytes, tw)
	if err != nil {
		t.Fatal(err)
	}
	got, err := jpeg.Decode(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	want := image.NewRGBA(image.Rect(0, 0, tw, th))
	draw.Draw(want, want.Bounds(), image.White, image.Point{}, draw.Src)
	draw.CatmullRom.Scale(want, want.Bounds(), src, src.Bounds(), draw.Over, nil)
	if got.Bounds() != want.Bounds() {
		t.Fatalf("bounds %v, want %v", got.Bounds(), want.Bounds())
	}
	var diff, n float64
	for y := range th {
		for x := range tw {
			r1, g1, b1, _ := got.At(x, y).RGBA()
			r2, g2, b2, _ := want.At(x, y).RGBA()
			for _, d := range []int{int(r1>>8) - int(r2>>8), int(g1>>8) - int(g2>>8), int(b1>>8) - int(b2>>8)} {
				diff += float64(max(d, -d))
				n++
			}
		}
	}
	if mean := diff / n; mean > 3 {
		t.Fatalf("mean difference %.2f levels from a direct scale", mean)
	}
}

// FuzzThumbnail feeds arbitrary bytes to the decoder chain: it must never
// panic, and whatever it accepts must come out as a JPEG within the size.
func FuzzThumbnail(f *testing.F) {
	for _, data := range fuzzSeeds(f) {
		f.Add(data)
	}
	if webp, err := os.ReadFile(webpFixture); err == nil {
		f.Add(webp)
	}
	const size, maxPixels, maxDecode = 64, 1 << 20, 8 << 20
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := thumbnail(data, maxPixels, maxDecode, size)
		if err != nil {
			return
		}
		img, err := jpeg.Decode(bytes.NewReader(out))
		if err != nil {
			t.Fatalf("thumbnail is not a JPEG: %v", err)
		}
		if b := img.Bounds(); b.Dx() > size || b.Dy() > size || b.Empty() {
			t.Fatalf("thumbnail bounds %v", b)
		}
	})
}

func TestFuzzCorpusPresent(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("testdata", "fuzz", "FuzzThumbnail", "*"))
	if err != nil || len(files) < len(fuzzSeeds(t)) {
		t.Fatalf("fuzz seed corpus missing (%d files, %v); run TestFixtures with -update", len(files), err)
	}
}

func BenchmarkThumbnailJPEG2000x1500(b *testing.B) {
	data := jpegBytes(b, 2000, 1500)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := thumbnail(data, DefaultMaxPixels, DefaultMaxDecodeBytes, DefaultThumbSize); err != nil {
			b.Fatal(err)
		}
	}
}
