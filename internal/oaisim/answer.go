package oaisim

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// The bodies the Server answers, shaped as OpenAI's API reference shows
// them (https://platform.openai.com/docs/api-reference): Chat
// Completions' chat.completion and its chat.completion.chunk stream,
// Responses' response and its events, embeddings' list, and the legacy
// text_completion. Only the fields clients read are filled in.

// maxBody bounds the request bodies the Server reads.
const maxBody = 64 << 20

// readBody reads a request body.
func readBody(r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err == nil && len(b) > maxBody {
		err = fmt.Errorf("body over %d bytes", maxBody)
	}
	return b, err
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// writeError writes OpenAI's error body: {"error": {"message", "type",
// "param", "code"}}, code null when empty.
func writeError(w http.ResponseWriter, status int, message, typ, code string) {
	var c any
	if code != "" {
		c = code
	}
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": message, "type": typ, "param": nil, "code": c}})
}

// refuse returns a func that writes an error.
func refuse(status int, message, typ, code string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) { writeError(w, status, message, typ, code) }
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// listModels answers GET .../models with the models the Config names.
func (s *Server) listModels(w http.ResponseWriter) {
	names := make([]string, 0, len(s.cfg.Models))
	for m := range s.cfg.Models {
		names = append(names, m)
	}
	slices.Sort(names)
	data := make([]any, len(names))
	for i, m := range names {
		data[i] = map[string]any{"id": m, "object": "model", "created": 1700000000, "owned_by": "oaisim"}
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

// usage is what a request used.
type usage struct{ prompt, completion int64 }

func (u usage) total() int64 { return u.prompt + u.completion }

// completionTokens is how many tokens each choice of a request generates:
// at most its allowance, and the same for the same request.
func completionTokens(req request, choice int64) int64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%s/%d/%d/%d", req.api, req.model, req.prompt, req.allowance, choice)
	return min(req.allowance, 1+int64(h.Sum64()%48))
}

// words returns text of about n tokens.
func words(n int64) string { return strings.Repeat("tok ", int(n)) }

// answer writes the answer to an admitted request and returns its usage.
func (s *Server) answer(w http.ResponseWriter, req request, id int64) usage {
	u := usage{prompt: req.prompt}
	texts := make([]string, req.choices)
	if req.api != embeddingsAPI {
		for i := range texts {
			n := completionTokens(req, int64(i))
			u.completion += n
			texts[i] = words(n)
		}
	}
	usageOf := func() map[string]any {
		return map[string]any{"prompt_tokens": u.prompt, "completion_tokens": u.completion, "total_tokens": u.total()}
	}
	created := s.now().Unix()
	switch req.api {
	case embeddingsAPI:
		data := make([]any, req.inputs)
		for i := range data {
			data[i] = map[string]any{"object": "embedding", "index": i, "embedding": []float64{0.1, -0.2, 0.3, 0.4}}
		}
		writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data, "model": req.model,
			"usage": map[string]any{"prompt_tokens": u.prompt, "total_tokens": u.total()}})
	case chatAPI:
		cid := "chatcmpl-" + itoa(id)
		if !req.stream {
			choices := make([]any, len(texts))
			for i, t := range texts {
				choices[i] = map[string]any{"index": i, "finish_reason": "stop", "logprobs": nil,
					"message": map[string]any{"role": "assistant", "content": t, "refusal": nil}}
			}
			writeJSON(w, http.StatusOK, map[string]any{"id": cid, "object": "chat.completion", "created": created,
				"model": req.model, "choices": choices, "usage": usageOf()})
			return u
		}
		ev := startEvents(w)
		chunk := func(choices []any, withUsage bool) map[string]any {
			c := map[string]any{"id": cid, "object": "chat.completion.chunk", "created": created, "model": req.model, "choices": choices}
			if req.includeUsage {
				c["usage"] = nil // "All other chunks will also include a usage field, but with a null value."
				if withUsage {
					c["usage"] = usageOf()
				}
			}
			return c
		}
		for i, t := range texts {
			ev.send("", chunk([]any{map[string]any{"index": i, "delta": map[string]any{"role": "assistant", "content": ""}, "finish_reason": nil}}, false))
			for _, part := range halves(t) {
				ev.send("", chunk([]any{map[string]any{"index": i, "delta": map[string]any{"content": part}, "finish_reason": nil}}, false))
			}
			ev.send("", chunk([]any{map[string]any{"index": i, "delta": map[string]any{}, "finish_reason": "stop"}}, false))
		}
		if req.includeUsage {
			ev.send("", chunk([]any{}, true))
		}
		ev.done()
	case completionsAPI:
		cid := "cmpl-" + itoa(id)
		choices := make([]any, len(texts))
		for i, t := range texts {
			choices[i] = map[string]any{"index": i, "text": t, "finish_reason": "stop", "logprobs": nil}
		}
		body := map[string]any{"id": cid, "object": "text_completion", "created": created, "model": req.model, "choices": choices}
		if !req.stream {
			body["usage"] = usageOf()
			writeJSON(w, http.StatusOK, body)
			return u
		}
		ev := startEvents(w)
		ev.send("", body)
		if req.includeUsage {
			ev.send("", map[string]any{"id": cid, "object": "text_completion", "created": created, "model": req.model, "choices": []any{}, "usage": usageOf()})
		}
		ev.done()
	case responsesAPI:
		rid, mid := "resp_"+itoa(id), "msg_"+itoa(id)
		response := func(status string, output []any, withUsage bool) map[string]any {
			r := map[string]any{"id": rid, "object": "response", "created_at": created, "status": status, "model": req.model,
				"output": output, "parallel_tool_calls": true, "tool_choice": "auto", "tools": []any{}}
			if withUsage {
				r["usage"] = map[string]any{"input_tokens": u.prompt, "input_tokens_details": map[string]any{"cached_tokens": 0},
					"output_tokens": u.completion, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": u.total()}
			}
			return r
		}
		message := []any{map[string]any{"type": "message", "id": mid, "status": "completed", "role": "assistant",
			"content": []any{map[string]any{"type": "output_text", "text": texts[0], "annotations": []any{}}}}}
		if !req.stream {
			writeJSON(w, http.StatusOK, response("completed", message, true))
			return u
		}
		ev := startEvents(w)
		ev.send("response.created", map[string]any{"type": "response.created", "response": response("in_progress", []any{}, false)})
		for _, part := range halves(texts[0]) {
			ev.send("response.output_text.delta", map[string]any{"type": "response.output_text.delta", "item_id": mid,
				"output_index": 0, "content_index": 0, "delta": part})
		}
		ev.send("response.completed", map[string]any{"type": "response.completed", "response": response("completed", message, true)})
	}
	return u
}

// halves splits a text in two pieces, to stream it in more than one.
func halves(t string) []string {
	mid := len(t) / 2
	return []string{t[:mid], t[mid:]}
}

// events writes server-sent events.
type events struct {
	w   http.ResponseWriter
	seq int
}

func startEvents(w http.ResponseWriter) *events {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return &events{w: w}
}

// send writes one event, named when name is set; Responses events carry
// their sequence number.
func (e *events) send(name string, data map[string]any) {
	if name != "" {
		data["sequence_number"] = e.seq
		fmt.Fprintf(e.w, "event: %s\n", name)
	}
	e.seq++
	b, _ := json.Marshal(data)
	fmt.Fprintf(e.w, "data: %s\n\n", b)
	if f, ok := e.w.(http.Flusher); ok {
		f.Flush()
	}
}

// done ends a Chat Completions or Completions stream.
func (e *events) done() {
	io.WriteString(e.w, "data: [DONE]\n\n")
}
