package openai

// Whether a server announces its limits. OpenAI tells a model's limits in
// every response (x-ratelimit-limit-requests, x-ratelimit-limit-tokens);
// Azure OpenAI may send only what remains, or -1
// (https://learn.microsoft.com/en-us/answers/questions/5625878/azure-openai-responses-api-x-ratelimit-headers-val);
// vLLM sends nothing. A limit that is neither given nor announced cannot
// be learned; provider.Announcing (the Transport's states) sends a scope's
// requests through the unannounced Transport while its server announces
// too little.

// unlearned names the buckets whose limits per minute l does not give:
// those its server must announce.
func (l Limits) unlearned() []string {
	var need []string
	if l.RPM == 0 {
		need = append(need, Requests)
	}
	if l.TPM == 0 {
		need = append(need, Tokens)
	}
	return need
}
