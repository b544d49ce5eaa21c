package gateway

import (
	"errors"
	"io"
	"net/http"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate"
)

// A provider builds an upstream's Transport and says where the upstream's
// key goes.
type provider struct {
	// build decodes the upstream's options and returns its Transport,
	// sending through base, with the hooks in cfg (tollgate.Config's
	// Trace and Logger). check calls it to check the options.
	build func(u *Upstream, rdb redis.UniversalClient, base http.RoundTripper, cfg tollgate.Config) (roundTripCloser, error)
	// keyHeader is the header the upstream's key is sent in; bearer says
	// "Authorization: Bearer KEY".
	keyHeader string
	bearer    bool
	// queryKey says that a passed-through key= goes to keyHeader, never
	// in the URL.
	queryKey bool
	// methods are the methods the provider's API uses: the only ones
	// forwarded.
	methods []string
}

// roundTripCloser is a provider's Transport.
type roundTripCloser interface {
	http.RoundTripper
	io.Closer
}

// providers are the providers by name.
var providers = map[string]provider{
	"youtube": {build: buildYouTube, keyHeader: "X-Goog-Api-Key", queryKey: true, methods: methodsYouTube},
	"openai":  {build: buildOpenAI, keyHeader: "Authorization", bearer: true, methods: methodsOpenAI},
	"gemini":  {build: buildGemini, keyHeader: "X-Goog-Api-Key", queryKey: true, methods: methodsGemini},
	"github":  {build: buildGitHub, keyHeader: "Authorization", bearer: true, methods: methodsREST},
	"custom":  {build: buildCustom, keyHeader: "Authorization", bearer: true, methods: methodsREST},
	// Anthropic's key goes in x-api-key; anthropic-version passes as the
	// caller sent it.
	"anthropic": {build: buildAnthropic, keyHeader: "X-Api-Key", methods: methodsAnthropic},
	// Shopify's access token goes in X-Shopify-Access-Token.
	"shopify": {build: buildShopify, keyHeader: "X-Shopify-Access-Token", methods: methodsREST},
}

// check decodes and checks the upstream's options: it builds the
// Transport on a client of no server, to have its constructor check the
// rest, and closes it. Nothing dials: the constructors do not contact
// Redis.
func (p provider) check(u *Upstream) error {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	c, err := p.build(u, rdb, nil, tollgate.Config{})
	if err != nil {
		return errors.New(oneLine(err.Error()))
	}
	if _, _, err := bodies(u); err != nil {
		c.Close()
		return err
	}
	return c.Close()
}
