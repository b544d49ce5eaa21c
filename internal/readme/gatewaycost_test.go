package readme

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/providers/openai"
)

// TestGatewayOpenAIDefaultCost: docs/gateway.md says what its OpenAI
// upstream, with no options, charges the Node snippet's streamed call, and
// points to count_usage; the number is the one openai's table charges for
// the body openai-node sends.
func TestGatewayOpenAIDefaultCost(t *testing.T) {
	table, err := costs.New(openai.Table(openai.Counting{}))
	if err != nil {
		t.Fatal(err)
	}
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Say hello."}],"stream":true}`
	req, err := http.NewRequest("POST", "https://api.openai.com/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	e, err := table.Resolve(req)
	if err != nil {
		t.Fatal(err)
	}
	var tokens int64
	for _, c := range e.Charges {
		if c.Bucket == openai.Tokens {
			tokens = c.Units
		}
	}
	if tokens != 4119 {
		t.Fatalf("the Node snippet's call is charged %d tokens; docs/gateway.md says 4,119", tokens)
	}
	page, err := os.ReadFile(filepath.Join(root(t), "docs", "gateway.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"charged 4,119 tokens", `"count_usage": true`, "4,096"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("docs/gateway.md does not say %q", want)
		}
	}
}
