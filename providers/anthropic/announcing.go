package anthropic

// Whether a server announces its limits. Anthropic tells a class's limits
// in every response (anthropic-ratelimit-*-limit); a gateway or a
// compatible server may send nothing. A limit that is neither given nor
// announced cannot be learned; provider.Announcing (the Transport's
// states) sends a scope's requests through the unannounced Transport while
// its server announces too little.

// unlearned names the buckets whose limits per minute l does not give:
// those its server must announce.
func (l Limits) unlearned() []string {
	var need []string
	if l.RPM == 0 {
		need = append(need, Requests)
	}
	if l.ITPM == 0 {
		need = append(need, InputTokens)
	}
	if l.OTPM == 0 {
		need = append(need, OutputTokens)
	}
	return need
}
