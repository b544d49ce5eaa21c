package gemini

import (
	"encoding/base64"
	"image"
	_ "image/gif"  // inline GIFs' dimensions
	_ "image/jpeg" // inline JPEGs' dimensions
	_ "image/png"  // inline PNGs' dimensions
	"io"
	"strings"

	"github.com/tollgate/tollgate/quota"
)

// maxUnits caps every count: the most units one charge may carry.
const maxUnits = quota.MaxUnits

// The rates of Google's token counting (Understand and count tokens,
// https://ai.google.dev/gemini-api/docs/tokens).
const (
	// CharsPerToken: "For Gemini models, a token is equivalent to about 4
	// characters."
	CharsPerToken = 4
	// TokensPerTile: "image inputs with both dimensions <=384 pixels are
	// counted as 258 tokens. Images larger in one or both dimensions are
	// cropped and scaled as needed into tiles of 768x768 pixels, each
	// counted as 258 tokens."
	TokensPerTile = 258
	// SmallImage and TileSide are those dimensions, in pixels.
	SmallImage, TileSide = 384, 768
	// VideoTokensPerSecond and AudioTokensPerSecond: "video at 263 tokens
	// per second and audio at 32 tokens per second".
	VideoTokensPerSecond = 263
	AudioTokensPerSecond = 32
)

// Counting says how inline media whose length the body does not show are
// counted; the zero value means the defaults.
//
// A request's input tokens are estimated before it is sent
// (https://ai.google.dev/gemini-api/docs/tokens):
//
//   - text: the characters of the body's strings (and of its keys, which
//     count a few tokens a message more than Google does): one token per
//     CharsPerToken ASCII characters, rounded up, and one per other
//     character (a Japanese or emoji character is at least a token);
//     inline data excepted;
//   - an inline image (inlineData image/png, image/jpeg or image/gif):
//     TokensPerTile for one of at most SmallImage pixels both ways, else
//     per TileSide square tile; an image whose dimensions cannot be read
//     (webp, heic, a broken header) counts TokensPerTile per
//     Counting.ImageBytesPerTile of its bytes, at least one tile;
//   - inline audio and video: their duration at the documented rates, the
//     duration taken from their bytes at a low bitrate
//     (Counting.AudioBytesPerSecond, VideoBytesPerSecond), so that the
//     estimate errs high;
//   - any other inline data (a PDF, text files): its bytes as text;
//   - parts given by URI (fileData): the body does not show their size,
//     so the whole request is counted by the API's countTokens method,
//     which is free, before it is sent; if that fails, the request is
//     refused, never sent unmetered.
//
// The estimate is settled to the answer's usageMetadata.promptTokenCount
// once its body is read (for a stream, its last chunk that tells it);
// embeddings' answers tell no usage, and keep the estimate.
type Counting struct {
	// ImageBytesPerTile is the bytes of an image of unknown dimensions
	// counted as one tile; 0 means 64 KiB.
	ImageBytesPerTile int64
	// AudioBytesPerSecond is the bytes of inline audio counted as a
	// second; 0 means 2,000 (16 kbit/s).
	AudioBytesPerSecond int64
	// VideoBytesPerSecond is the bytes of inline video counted as a
	// second; 0 means 12,500 (100 kbit/s).
	VideoBytesPerSecond int64
}

// withDefaults fills in the zero values.
func (c Counting) withDefaults() Counting {
	if c.ImageBytesPerTile <= 0 {
		c.ImageBytesPerTile = 64 << 10
	}
	if c.AudioBytesPerSecond <= 0 {
		c.AudioBytesPerSecond = 2000
	}
	if c.VideoBytesPerSecond <= 0 {
		c.VideoBytesPerSecond = 12500
	}
	return c
}

// tokens estimates the input tokens of a request's facts.
func (c Counting) tokens(f facts) int64 {
	c = c.withDefaults()
	n := ceilDiv(f.text, CharsPerToken)
	n = capAdd(n, f.wide)
	for _, m := range f.media {
		n = capAdd(n, c.mediaTokens(m))
	}
	return max(n, 1)
}

// mediaTokens estimates an inline part's tokens.
func (c Counting) mediaTokens(m media) int64 {
	size := decodedLen(m.data)
	switch kind, _, _ := strings.Cut(m.mimeType, "/"); kind {
	case "image":
		if w, h, ok := dimensions(m.data); ok {
			if w <= SmallImage && h <= SmallImage {
				return TokensPerTile
			}
			return min(ceilDiv(int64(w), TileSide)*ceilDiv(int64(h), TileSide), maxUnits/TokensPerTile) * TokensPerTile
		}
		return max(ceilDiv(size, c.ImageBytesPerTile), 1) * TokensPerTile
	case "audio":
		return min(ceilDiv(size, c.AudioBytesPerSecond), maxUnits/VideoTokensPerSecond) * AudioTokensPerSecond
	case "video":
		return min(ceilDiv(size, c.VideoBytesPerSecond), maxUnits/VideoTokensPerSecond) * VideoTokensPerSecond
	}
	return ceilDiv(size, CharsPerToken)
}

// dimensions reads an inline image's width and height from its header.
func dimensions(data string) (w, h int, ok bool) {
	r := base64.NewDecoder(base64.StdEncoding, strings.NewReader(data))
	cfg, _, err := image.DecodeConfig(io.LimitReader(r, 1<<20))
	if err != nil || cfg.Width <= 0 || cfg.Height <= 0 {
		// Some clients send URL-safe base64.
		r = base64.NewDecoder(base64.URLEncoding, strings.NewReader(data))
		if cfg, _, err = image.DecodeConfig(io.LimitReader(r, 1<<20)); err != nil || cfg.Width <= 0 || cfg.Height <= 0 {
			return 0, 0, false
		}
	}
	return cfg.Width, cfg.Height, true
}

// ceilDiv is a/b rounded up, for a >= 0 and b > 0.
func ceilDiv(a, b int64) int64 {
	if a <= 0 {
		return 0
	}
	return (a-1)/b + 1
}

// capAdd adds two counts, stopping at maxUnits.
func capAdd(a, b int64) int64 {
	if a > maxUnits-b {
		return maxUnits
	}
	return a + b
}
