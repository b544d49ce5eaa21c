package anthsim

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// The requests the Server reads and the bodies it answers, shaped as the
// Messages API reference shows them
// (https://docs.anthropic.com/en/api/messages, and its streaming page,
// https://docs.anthropic.com/en/api/messages-streaming). Only the fields
// clients read are filled in.

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// readBody reads a request body of at most limit bytes.
func readBody(r *http.Request, limit int64) (body []byte, tooLarge bool, err error) {
	b, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, false, err
	}
	return b, int64(len(b)) > limit, nil
}

// writeError writes the API's error body: {"type": "error", "error":
// {"type", "message"}} (errors page, https://docs.anthropic.com/en/api/errors).
func writeError(w http.ResponseWriter, status int, typ, message string) {
	writeJSON(w, status, map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": message}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// piece is a part of the prompt, in the order the API caches it (tools,
// system, messages), and whether a cache breakpoint ends it.
type piece struct {
	text  string
	cache bool
}

// request is what the Server reads of a Messages request.
type request struct {
	model     string
	maxTokens int64
	stream    bool
	pieces    []piece
	messages  int
	tools     bool
}

// readRequest reads a Messages request: model, max_tokens and messages
// are required.
func readRequest(body []byte) (request, error) {
	var raw struct {
		Model     string            `json:"model"`
		MaxTokens json.Number       `json:"max_tokens"`
		Stream    bool              `json:"stream"`
		System    json.RawMessage   `json:"system"`
		Messages  []json.RawMessage `json:"messages"`
		Tools     []json.RawMessage `json:"tools"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return request{}, fmt.Errorf("invalid JSON: %v", err)
	}
	req := request{model: raw.Model, stream: raw.Stream, messages: len(raw.Messages), tools: len(raw.Tools) > 0}
	n, err := strconv.ParseInt(string(raw.MaxTokens), 10, 64)
	switch {
	case raw.Model == "":
		return req, errors.New("model: Field required")
	case err != nil || n < 1:
		return req, errors.New("max_tokens: Field required, a positive integer")
	case len(raw.Messages) == 0:
		return req, errors.New("messages: at least one message is required")
	}
	req.maxTokens = n
	for _, t := range raw.Tools {
		req.pieces = append(req.pieces, blockPiece(t))
	}
	req.pieces = append(req.pieces, contentPieces(raw.System)...)
	for _, m := range raw.Messages {
		var msg struct {
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(m, &msg) != nil {
			return req, errors.New("messages: each must be an object")
		}
		req.pieces = append(req.pieces, contentPieces(msg.Content)...)
	}
	return req, nil
}

// contentPieces reads a content (or system): a string, or an array of
// blocks.
func contentPieces(raw json.RawMessage) []piece {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []piece{{text: s}}
	}
	var blocks []json.RawMessage
	if json.Unmarshal(raw, &blocks) != nil {
		return nil
	}
	out := make([]piece, 0, len(blocks))
	for _, b := range blocks {
		out = append(out, blockPiece(b))
	}
	return out
}

// blockPiece reads a block: a text block's text, any other block's JSON;
// a cache_control marks a breakpoint.
func blockPiece(raw json.RawMessage) piece {
	var b struct {
		Type         string          `json:"type"`
		Text         string          `json:"text"`
		CacheControl json.RawMessage `json:"cache_control"`
	}
	_ = json.Unmarshal(raw, &b)
	p := piece{text: string(raw), cache: len(b.CacheControl) > 0 && string(b.CacheControl) != "null"}
	if b.Type == "text" {
		p.text = b.Text
	}
	return p
}

// The Server's tokenizer: a token per four bytes of text, rounded up,
// four per message, three per request, 300 for the tool use system prompt
// when tools are given. Never more than the bytes of the request body,
// the bound providers/anthropic's estimate relies on.
const (
	bytesPerToken = 4
	messageTokens = 4
	requestTokens = 3
	toolUseTokens = 300
)

func tokens(text string) int64 { return int64((len(text) + bytesPerToken - 1) / bytesPerToken) }

// usageOf counts a request's input as the API would: the prefix up to the
// last breakpoint already cached is read from the cache, the rest up to
// the last breakpoint written to it, the remainder is input_tokens. It
// returns the prefixes to remember as cached once the request is
// admitted. Called with s.mu held.
func (s *Server) usageOf(org string, req request) (Usage, []string) {
	var u Usage
	total := int64(requestTokens + messageTokens*req.messages)
	if req.tools {
		total += toolUseTokens
	}
	h := sha256.New()
	h.Write([]byte(org + "\x00" + req.model))
	var sum, read, lastBreak int64
	var writes []string
	for _, p := range req.pieces {
		h.Write([]byte(p.text))
		h.Write([]byte{0})
		sum += tokens(p.text)
		if !p.cache {
			continue
		}
		key := hex.EncodeToString(h.Sum(nil))
		lastBreak = sum
		if s.caches[key] {
			read, writes = sum, nil
		} else {
			writes = append(writes, key)
		}
	}
	total += sum
	u.CacheReadInputTokens = read
	u.CacheCreationInputTokens = lastBreak - read
	u.InputTokens = total - lastBreak
	return u, writes
}

// outputTokens is how many tokens a request generates: from half its
// max_tokens to all of it, as a model asked for an answer of about that
// size writes, and the same for the same request.
func outputTokens(req request, u Usage) int64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%d/%d/%d", req.model, u.InputTokens, u.CacheReadInputTokens, req.maxTokens)
	half := req.maxTokens / 2
	return half + 1 + int64(h.Sum64()%uint64(req.maxTokens-half))
}

// text is an answer of n tokens: a word each.
func text(n int64) string { return strings.Repeat("ok ", int(n)) }

func usageJSON(u Usage) map[string]any {
	return map[string]any{"input_tokens": u.InputTokens, "cache_creation_input_tokens": u.CacheCreationInputTokens,
		"cache_read_input_tokens": u.CacheReadInputTokens, "output_tokens": u.OutputTokens}
}

func stopReason(req request, out int64) string {
	if out >= req.maxTokens {
		return "max_tokens"
	}
	return "end_turn"
}

// answer writes a JSON Message and corrects the OTPM charged.
func (s *Server) answer(w http.ResponseWriter, req request, a admission) {
	u := a.usage
	u.OutputTokens = outputTokens(req, u)
	writeJSON(w, http.StatusOK, map[string]any{
		"id": "msg_sim" + itoa(a.id), "type": "message", "role": "assistant", "model": req.model,
		"content":     []any{map[string]any{"type": "text", "text": text(u.OutputTokens)}},
		"stop_reason": stopReason(req, u.OutputTokens), "stop_sequence": nil, "usage": usageJSON(u),
	})
	s.settle(a, u)
}

// stream writes the answer as server-sent events: message_start (with the
// input usage), a text content block, message_delta (with the output
// tokens' usage, "cumulative"), message_stop; then corrects the OTPM
// charged.
func (s *Server) stream(w http.ResponseWriter, req request, a admission) {
	u := a.usage
	u.OutputTokens = outputTokens(req, u)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	send := func(name string, data map[string]any) {
		data["type"] = name
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	start := usageJSON(u)
	start["output_tokens"] = 1
	send("message_start", map[string]any{"message": map[string]any{"id": "msg_sim" + itoa(a.id), "type": "message",
		"role": "assistant", "model": req.model, "content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": start}})
	send("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
	send("ping", map[string]any{})
	for left := u.OutputTokens; left > 0; left -= 16 {
		send("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "text_delta", "text": text(min(left, 16))}})
	}
	send("content_block_stop", map[string]any{"index": 0})
	send("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stopReason(req, u.OutputTokens), "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": u.OutputTokens}})
	send("message_stop", map[string]any{})
	s.settle(a, u)
}
