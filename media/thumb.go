package media

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/jpeg"

	// Registered for image.Decode: the formats chat platforms serve.
	_ "image/gif"
	_ "image/png"

	"golang.org/x/image/draw"
	_ "golang.org/x/image/webp"
)

// thumbQuality is the JPEG quality of thumbnails: small files, no visible blocking
// at thumbnail size.
const thumbQuality = 80

// errUndecodable marks content that is not an image we can read, or one that
// breaks a limit; such content fails for good rather than being retried.
var errUndecodable = errors.New("undecodable")

// thumbnail decodes data (PNG, JPEG, GIF first frame, WebP) and returns a JPEG whose longest
// side is at most size, transparency flattened onto white. Before any pixel is decoded, the
// header is checked against maxPixels (width × height) and against maxDecode, the bytes the
// decoder would allocate for those pixels (decodeCost: bytes per pixel of the decoded form,
// 8 for 16-bit RGBA, and the decoder's own buffers), so a small file that claims a huge or
// deep image cannot exhaust memory. Every error wraps errUndecodable.
func thumbnail(data []byte, maxPixels int, maxDecode int64, size int) ([]byte, error) {
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errUndecodable, err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return nil, fmt.Errorf("%w: empty %s (%dx%d)", errUndecodable, format, cfg.Width, cfg.Height)
	}
	// int64 keeps the product from overflowing on 32-bit platforms.
	if int64(cfg.Width)*int64(cfg.Height) > int64(maxPixels) {
		return nil, fmt.Errorf("%w: too many pixels (%s %dx%d)", errUndecodable, format, cfg.Width, cfg.Height)
	}
	if cost := decodeCost(data, format, cfg); cost > maxDecode {
		return nil, fmt.Errorf("%w: too large to decode (%s %dx%d needs %d MiB, over the %d MiB budget)",
			errUndecodable, format, cfg.Width, cfg.Height, (cost+1<<20-1)>>20, maxDecode>>20)
	}
	src, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", errUndecodable, format, err)
	}
	sb := src.Bounds()
	// A decoder may return a frame that disagrees with its header; the pixel cap
	// must hold for what was actually decoded.
	if sb.Empty() || int64(sb.Dx())*int64(sb.Dy()) > int64(maxPixels) {
		return nil, fmt.Errorf("%w: bad %s bounds %v", errUndecodable, format, sb)
	}

	w, h := fit(sb.Dx(), sb.Dy(), size)
	dst := image.NewRGBA(image.Rect(0, 0, w, h))
	// JPEG has no alpha: paint white first and composite the image over it.
	draw.Draw(dst, dst.Bounds(), image.White, image.Point{}, draw.Src)
	switch {
	case w == sb.Dx() && h == sb.Dy():
		draw.Draw(dst, dst.Bounds(), src, sb.Min, draw.Over)
	default:
		// CatmullRom's cost grows with the shrink factor; averaging whole blocks
		// first keeps a large photo at a few tens of ms with the same smoothness.
		if k := min(sb.Dx()/(2*w), sb.Dy()/(2*h)); k >= 2 {
			src = boxShrink(src, k)
			sb = src.Bounds()
		}
		draw.CatmullRom.Scale(dst, dst.Bounds(), src, sb, draw.Over, nil)
	}

	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, dst, &jpeg.Options{Quality: thumbQuality}); err != nil {
		// Only reachable for dimensions JPEG cannot hold (over 65535).
		return nil, fmt.Errorf("%w: encode thumbnail: %v", errUndecodable, err)
	}
	return buf.Bytes(), nil
}

// fit returns w x h scaled down so the longest side is at most size, keeping
// the aspect ratio and at least one pixel per side. Smaller images keep their size.
func fit(w, h, size int) (int, int) {
	if size <= 0 || (w <= size && h <= size) {
		return w, h
	}
	if w >= h {
		return size, max(1, int((int64(h)*int64(size)+int64(w)/2)/int64(w)))
	}
	return max(1, int((int64(w)*int64(size)+int64(h)/2)/int64(h))), size
}

// boxShrink returns src reduced k times per side by averaging k x k blocks
// (premultiplied, so transparency averages correctly). The last partial row and
// column of blocks are dropped: under k pixels, invisible after the final scale.
// It converts k source rows at a time, so memory stays at one strip whatever the
// source size.
func boxShrink(src image.Image, k int) *image.RGBA {
	sb := src.Bounds()
	w, h := sb.Dx()/k, sb.Dy()/k
	dst := image.NewRGBA(image.Rect(0, 0, w, h))
	strip := image.NewRGBA(image.Rect(0, 0, w*k, k))
	sums := make([]uint32, w*4)
	n := uint32(k * k)
	for y := range h {
		draw.Draw(strip, strip.Bounds(), src, image.Pt(sb.Min.X, sb.Min.Y+y*k), draw.Src)
		clear(sums)
		for row := range k {
			pix := strip.Pix[row*strip.Stride : row*strip.Stride+w*k*4]
			for bx := range w {
				block := pix[bx*k*4 : (bx+1)*k*4]
				var r, g, b, a uint32
				for p := 0; p+3 < len(block); p += 4 {
					r += uint32(block[p])
					g += uint32(block[p+1])
					b += uint32(block[p+2])
					a += uint32(block[p+3])
				}
				sum := sums[bx*4 : bx*4+4]
				sum[0] += r
				sum[1] += g
				sum[2] += b
				sum[3] += a
			}
		}
		out := dst.Pix[y*dst.Stride : y*dst.Stride+w*4]
		for i, s := range sums {
			out[i] = uint8((s + n/2) / n)
		}
	}
	return dst
}
