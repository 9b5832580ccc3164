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
// 8 for 16-bit RGBA, and the decoder's own buffers) together with the thumbnailer's own
// (thumbCost: the shrunk copy, its strip and the thumbnail), so a small file that claims a
// huge, deep or very wide image cannot exhaust memory. Every error wraps errUndecodable.
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
	if cost := decodeCost(data, format, cfg) + thumbCost(cfg.Width, cfg.Height, size); cost > maxDecode {
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
		// Each side has its own factor, so a very wide image shrinks to about twice
		// the thumbnail, not to a copy as long as the image.
		if kx, ky := shrinkFactors(sb.Dx(), sb.Dy(), w, h); kx >= 2 || ky >= 2 {
			src = boxShrink(src, kx, ky)
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

// stripBytes bounds boxShrink's strip: the source pixels it converts at a time.
const stripBytes = 1 << 20

// shrinkFactors are the block sides boxShrink averages to bring a w × h image near twice the
// tw × th thumbnail: at least 1 each.
func shrinkFactors(w, h, tw, th int) (kx, ky int) {
	return max(1, w/(2*tw)), max(1, h/(2*th))
}

// stripCols is how many kx × ky blocks boxShrink converts at a time: a strip of at most
// stripBytes (or one block, when a block alone is larger), and no more than the w blocks a row
// has.
func stripCols(w, kx, ky int) int {
	return max(1, min(w, stripBytes/(4*kx*ky)))
}

// thumbCost is what thumbnail allocates beyond the decoder for a w × h image shrunk to fit
// size: the thumbnail itself and, when it box-shrinks first, the shrunk copy and its strip.
func thumbCost(w, h, size int) int64 {
	tw, th := fit(w, h, size)
	cost := 4 * int64(tw) * int64(th)
	if w == tw && h == th {
		return cost
	}
	if kx, ky := shrinkFactors(w, h, tw, th); kx >= 2 || ky >= 2 {
		bw, bh := int64(w/kx), int64(h/ky)
		cost += 4*bw*bh + 4*int64(stripCols(w/kx, kx, ky))*int64(kx)*int64(ky) + 16*bw
	}
	return cost
}

// boxShrink returns src reduced kx times across and ky times down by averaging kx × ky blocks
// (premultiplied, so transparency averages correctly). The last partial row and column of
// blocks are dropped: under a block, invisible after the final scale. It converts a strip of
// at most stripBytes at a time (a run of blocks of one block row), so memory stays at that
// strip and the result whatever the source's size or shape.
func boxShrink(src image.Image, kx, ky int) *image.RGBA {
	sb := src.Bounds()
	w, h := sb.Dx()/kx, sb.Dy()/ky
	dst := image.NewRGBA(image.Rect(0, 0, w, h))
	cols := stripCols(w, kx, ky)
	strip := image.NewRGBA(image.Rect(0, 0, cols*kx, ky))
	sums := make([]uint32, cols*4)
	n := uint32(kx * ky)
	for y := range h {
		for x0 := 0; x0 < w; x0 += cols {
			c := min(cols, w-x0)
			draw.Draw(strip, image.Rect(0, 0, c*kx, ky), src, image.Pt(sb.Min.X+x0*kx, sb.Min.Y+y*ky), draw.Src)
			clear(sums)
			for row := range ky {
				pix := strip.Pix[row*strip.Stride : row*strip.Stride+c*kx*4]
				for bx := range c {
					block := pix[bx*kx*4 : (bx+1)*kx*4]
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
			out := dst.Pix[y*dst.Stride+x0*4 : y*dst.Stride+(x0+c)*4]
			for i := range out {
				out[i] = uint8((sums[i] + n/2) / n)
			}
		}
	}
	return dst
}
