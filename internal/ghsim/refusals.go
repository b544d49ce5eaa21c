package ghsim

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// The bodies of GitHub's refusals. GitHub documents their status codes and
// headers, and that a secondary refusal's message "indicates that you
// exceeded a secondary rate limit"; the exact messages below are the ones
// its documentation showed
// (https://github.com/github/docs/blob/015d8c38bacc76ad8b57b9ad65c9616ec9a238ea/content/rest/overview/resources-in-the-rest-api.md)
// and ones seen in answers since (the primary "for user ID" message,
// documentation URLs of the current pages).
const (
	primaryDoc   = "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"
	secondaryDoc = "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"

	secondaryMessage = "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."
	contentMessage   = "You have exceeded a secondary rate limit and have been temporarily blocked from content creation. Please retry your request again later."
	anonymousMessage = "API rate limit exceeded for 127.0.0.1. (But here's the good news: Authenticated requests get a higher rate limit. Check out the documentation for more details.)"
)

// refusal is an answer that refuses a request for a rate limit.
type refusal struct {
	graphQL    bool          // answered as GraphQL answers a primary limit: 200, errors of type RATE_LIMITED
	message    string        // what the body says
	doc        string        // its documentation_url
	retryAfter time.Duration // sent as Retry-After when positive
}

// primaryRefusal is the refusal of a primary limit.
func primaryRefusal(u *user, graphQL bool) *refusal {
	msg := "API rate limit exceeded for user ID " + strconv.Itoa(u.id) + "."
	if u.anon {
		msg = anonymousMessage
	}
	return &refusal{graphQL: graphQL, message: msg, doc: primaryDoc}
}

// secondaryRefusal is the refusal of a secondary limit; content says it
// was the limit on content creation.
func secondaryRefusal(content bool, retryAfter time.Duration) *refusal {
	msg := secondaryMessage
	if content {
		msg = contentMessage
	}
	return &refusal{message: msg, doc: secondaryDoc, retryAfter: retryAfter}
}

// write answers the refusal with the rate-limit headers head, and status
// (403 or 429) unless it is GraphQL's 200.
func (f *refusal) write(w http.ResponseWriter, head http.Header, status int) {
	for k, v := range head {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	if f.retryAfter > 0 {
		secs := int64((f.retryAfter + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	}
	if f.graphQL {
		json.NewEncoder(w).Encode(map[string]any{"errors": []map[string]string{{"type": "RATE_LIMITED", "message": f.message}}})
		return
	}
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"message": f.message, "documentation_url": f.doc})
}
