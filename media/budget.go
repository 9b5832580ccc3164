package media

import (
	"encoding/binary"
	"image"
	"image/color"
)

// decodeCost estimates, from an image's header alone, how many bytes the standard decoders
// allocate for its pixels: the decoded image in the form the decoder returns it, and the
// buffers of the same order the decoder holds meanwhile (a progressive JPEG's coefficients, an
// interlaced PNG's passes, a lossless WebP's transform output). It errs on the high side where
// the header leaves the form open (a PNG's tRNS chunk, read after the header, turns 1-byte gray
// into 4-byte NRGBA). A GIF costs its first frame only: that is all image.Decode reads.
func decodeCost(data []byte, format string, cfg image.Config) int64 {
	w, h := int64(cfg.Width), int64(cfg.Height)
	px := w * h
	switch format {
	case "jpeg":
		if c, ok := jpegCost(data, w, h); ok {
			return c
		}
		// Unreadable frame header (the decoder will say why): the worst case, four
		// full-resolution components with their coefficients and the converted image.
		return px * (4*5 + 4)
	case "png":
		bpp := int64(4) // 8-bit gray and RGB become NRGBA when a tRNS chunk follows the header
		switch cfg.ColorModel {
		case color.Gray16Model, color.RGBA64Model, color.NRGBA64Model:
			bpp = 8
		default:
			if _, ok := cfg.ColorModel.(color.Palette); ok {
				bpp = 1
			}
		}
		if len(data) > 28 && data[28] == 1 {
			bpp *= 2 // Adam7: each pass is decoded into an image of its own, then copied
		}
		// The decoder's two rows (this one and the last, for the filters) in the file's own
		// form: small for a square image, 20 MB for one 3,352,410 pixels wide.
		return px*bpp + 2*(w*pngRawBytes(data)+1)
	case "gif":
		return px // one paletted frame, within the logical screen
	case "webp":
		chroma := 2 * ((w + 1) / 2) * ((h + 1) / 2)
		switch cfg.ColorModel {
		case color.YCbCrModel: // lossy VP8, 4:2:0
			return px + chroma
		case color.NYCbCrAModel: // lossy with an alpha plane, itself decoded as a lossless image
			return px + chroma + px + 4*px
		default: // lossless VP8L: the pixels, and a second copy while a transform is undone
			return 8 * px
		}
	}
	return 8 * px
}

// jpegCost reads a JPEG's frame header (SOF) for its components' sampling factors and whether
// it is progressive. Go's decoder allocates each component's plane padded to whole MCUs (one
// byte a sample), for a progressive image 256 bytes of coefficients per 8×8 block of every
// component besides, and for four components a converted CMYK or RGBA image at 4 bytes a pixel.
func jpegCost(data []byte, w, h int64) (int64, bool) {
	sof, progressive, ok := jpegFrame(data)
	if !ok {
		return 0, false
	}
	n := int(sof[5])
	if n != 1 && n != 3 && n != 4 || len(sof) < 6+3*n {
		return 0, false
	}
	hmax, vmax := int64(1), int64(1)
	hv := make([][2]int64, n)
	for i := range n {
		b := sof[6+3*i+1]
		hv[i] = [2]int64{int64(b >> 4), int64(b & 0x0f)}
		if hv[i][0] < 1 || hv[i][0] > 4 || hv[i][1] < 1 || hv[i][1] > 4 {
			return 0, false
		}
		hmax, vmax = max(hmax, hv[i][0]), max(vmax, hv[i][1])
	}
	mcuX, mcuY := (w+8*hmax-1)/(8*hmax), (h+8*vmax-1)/(8*vmax)
	var planes int64
	for _, f := range hv {
		planes += mcuX * 8 * f[0] * mcuY * 8 * f[1]
	}
	cost := planes
	if progressive {
		cost += 4 * planes // a [64]int32 block per 64 samples
	}
	if n == 4 {
		cost += 4 * w * h
	}
	return cost, true
}

// jpegFrame walks a JPEG's markers to its frame header and returns the header's body (after
// the length), and whether it starts a progressive frame (SOF2).
func jpegFrame(data []byte) (sof []byte, progressive, ok bool) {
	if len(data) < 4 || data[0] != 0xff || data[1] != 0xd8 {
		return nil, false, false
	}
	i := 2
	for i+4 <= len(data) {
		if data[i] != 0xff {
			return nil, false, false
		}
		m := data[i+1]
		if m == 0xff { // fill byte
			i++
			continue
		}
		if m == 0x01 || (m >= 0xd0 && m <= 0xd8) { // markers without a length
			i += 2
			continue
		}
		n := int(binary.BigEndian.Uint16(data[i+2:]))
		if n < 2 || i+2+n > len(data) {
			return nil, false, false
		}
		body := data[i+4 : i+2+n]
		switch m {
		case 0xc0, 0xc1, 0xc2:
			if len(body) < 6 {
				return nil, false, false
			}
			return body, m == 0xc2, true
		case 0xda, 0xd9: // a scan or the end before any frame
			return nil, false, false
		}
		i += 2 + n
	}
	return nil, false, false
}

// pngRawBytes is the bytes a PNG's pixel takes in its rows as stored (its channels times its
// bit depth, rounded up to a byte), read from the header; 8, the most, when unreadable.
func pngRawBytes(data []byte) int64 {
	if len(data) < 26 {
		return 8
	}
	channels := map[byte]int64{0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[data[25]]
	if channels == 0 {
		return 8
	}
	return max(1, (channels*int64(data[24])+7)/8)
}
