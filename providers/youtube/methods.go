package youtube

import (
	"net"
	"net/http"
	"slices"
	"strings"

	"github.com/tollgate/tollgate/costs"
)

// method is one method of the API and its classic price.
type method struct {
	name  string // the endpoint's name, e.g. "search.list"
	verb  string // HTTP method
	path  string // under the host, e.g. "/youtube/v3/search"
	units int64  // classic price in pool units
	// media marks the methods that take a file: they are also served
	// under "/upload" + path and "/resumable/upload" + path.
	media bool
}

// methods is every method of the YouTube Data API v3, as the discovery
// document of google.golang.org/api v0.309.0 (revision 20261019) lists
// them, with its classic price. Endpoint names are the discovery ids
// without "youtube.", except the live chat stream
// (youtube.youtube.v3.liveChat.messages.stream), named for its reference
// page: liveChatMessages.streamList.
//
// The comment beside each row names the page stating its price:
//
//	calculator  https://developers.google.com/youtube/v3/determine_quota_cost
//	docs/X      https://developers.google.com/youtube/v3/docs/X
//	rest/X      https://developers.google.com/youtube/data/reference/rest/v3/X
//	live/X      https://developers.google.com/youtube/data/live/reference/rest/v3/X
//	discovery   the method's description in the discovery document
//	history     https://developers.google.com/youtube/v3/revision_history
//	assumed     no page states a price: reads 1, writes 50
var methods = []method{
	{"abuseReports.insert", "POST", "/youtube/v3/abuseReports", 50, false}, // assumed
	{"activities.list", "GET", "/youtube/v3/activities", 1, false},         // calculator

	{"captions.delete", "DELETE", "/youtube/v3/captions", 50, false},      // calculator
	{"captions.download", "GET", "/youtube/v3/captions/{id}", 200, false}, // docs/captions/download
	{"captions.insert", "POST", "/youtube/v3/captions", 400, true},        // docs/captions/insert
	{"captions.list", "GET", "/youtube/v3/captions", 50, false},           // calculator
	{"captions.update", "PUT", "/youtube/v3/captions", 450, true},         // docs/captions/update

	{"channelBanners.insert", "POST", "/youtube/v3/channelBanners/insert", 50, true}, // docs/channelBanners/insert

	{"channelSections.delete", "DELETE", "/youtube/v3/channelSections", 50, false}, // calculator
	{"channelSections.insert", "POST", "/youtube/v3/channelSections", 50, false},   // calculator
	{"channelSections.list", "GET", "/youtube/v3/channelSections", 1, false},       // docs/channelSections/list
	{"channelSections.update", "PUT", "/youtube/v3/channelSections", 50, false},    // calculator

	{"channels.list", "GET", "/youtube/v3/channels", 1, false},    // calculator
	{"channels.update", "PUT", "/youtube/v3/channels", 50, false}, // calculator

	{"commentThreads.insert", "POST", "/youtube/v3/commentThreads", 50, false}, // docs/commentThreads/insert
	{"commentThreads.list", "GET", "/youtube/v3/commentThreads", 1, false},     // calculator

	{"comments.delete", "DELETE", "/youtube/v3/comments", 50, false},                                // calculator
	{"comments.insert", "POST", "/youtube/v3/comments", 50, false},                                  // calculator
	{"comments.list", "GET", "/youtube/v3/comments", 1, false},                                      // calculator
	{"comments.markAsSpam", "POST", "/youtube/v3/comments/markAsSpam", 50, false},                   // docs/comments/markAsSpam
	{"comments.setModerationStatus", "POST", "/youtube/v3/comments/setModerationStatus", 50, false}, // calculator
	{"comments.update", "PUT", "/youtube/v3/comments", 50, false},                                   // calculator

	{"i18nLanguages.list", "GET", "/youtube/v3/i18nLanguages", 1, false}, // calculator
	{"i18nRegions.list", "GET", "/youtube/v3/i18nRegions", 1, false},     // calculator

	{"liveBroadcasts.bind", "POST", "/youtube/v3/liveBroadcasts/bind", 50, false},                  // assumed
	{"liveBroadcasts.delete", "DELETE", "/youtube/v3/liveBroadcasts", 50, false},                   // assumed
	{"liveBroadcasts.insert", "POST", "/youtube/v3/liveBroadcasts", 50, false},                     // assumed
	{"liveBroadcasts.insertCuepoint", "POST", "/youtube/v3/liveBroadcasts/cuepoint", 50, false},    // assumed
	{"liveBroadcasts.list", "GET", "/youtube/v3/liveBroadcasts", 1, false},                         // assumed
	{"liveBroadcasts.transition", "POST", "/youtube/v3/liveBroadcasts/transition", 50, false},      // assumed
	{"liveBroadcasts.update", "PUT", "/youtube/v3/liveBroadcasts", 50, false},                      // assumed
	{"liveChatBans.delete", "DELETE", "/youtube/v3/liveChat/bans", 50, false},                      // assumed
	{"liveChatBans.insert", "POST", "/youtube/v3/liveChat/bans", 50, false},                        // assumed
	{"liveChatMessages.delete", "DELETE", "/youtube/v3/liveChat/messages", 20, false},              // live/liveChatMessages/delete
	{"liveChatMessages.insert", "POST", "/youtube/v3/liveChat/messages", 20, false},                // live/liveChatMessages/insert
	{"liveChatMessages.list", "GET", "/youtube/v3/liveChat/messages", 5, false},                    // live/liveChatMessages/list
	{"liveChatMessages.streamList", "GET", "/youtube/v3/liveChat/messages/stream", 5, false},       // live/liveChatMessages/streamList
	{"liveChatMessages.transition", "POST", "/youtube/v3/liveChat/messages/transition", 20, false}, // discovery
	{"liveChatModerators.delete", "DELETE", "/youtube/v3/liveChat/moderators", 50, false},          // assumed
	{"liveChatModerators.insert", "POST", "/youtube/v3/liveChat/moderators", 50, false},            // assumed
	{"liveChatModerators.list", "GET", "/youtube/v3/liveChat/moderators", 1, false},                // assumed
	{"liveStreams.delete", "DELETE", "/youtube/v3/liveStreams", 50, false},                         // assumed
	{"liveStreams.insert", "POST", "/youtube/v3/liveStreams", 50, false},                           // assumed
	{"liveStreams.list", "GET", "/youtube/v3/liveStreams", 1, false},                               // assumed
	{"liveStreams.update", "PUT", "/youtube/v3/liveStreams", 50, false},                            // assumed

	// docs/members/list says 2; the calculator's 1 is taken, as for its
	// other rows.
	{"members.list", "GET", "/youtube/v3/members", 1, false},                     // calculator
	{"membershipsLevels.list", "GET", "/youtube/v3/membershipsLevels", 1, false}, // docs/membershipsLevels/list

	{"playlistImages.delete", "DELETE", "/youtube/v3/playlistImages", 50, false}, // rest/playlistImages/delete
	{"playlistImages.insert", "POST", "/youtube/v3/playlistImages", 50, true},    // docs/playlistImages/insert
	{"playlistImages.list", "GET", "/youtube/v3/playlistImages", 1, false},       // docs/playlistImages/list
	{"playlistImages.update", "PUT", "/youtube/v3/playlistImages", 50, true},     // rest/playlistImages/update

	{"playlistItems.delete", "DELETE", "/youtube/v3/playlistItems", 50, false}, // calculator
	{"playlistItems.insert", "POST", "/youtube/v3/playlistItems", 50, false},   // calculator
	{"playlistItems.list", "GET", "/youtube/v3/playlistItems", 1, false},       // calculator
	{"playlistItems.update", "PUT", "/youtube/v3/playlistItems", 50, false},    // calculator

	{"playlists.delete", "DELETE", "/youtube/v3/playlists", 50, false}, // calculator
	{"playlists.insert", "POST", "/youtube/v3/playlists", 50, false},   // calculator
	{"playlists.list", "GET", "/youtube/v3/playlists", 1, false},       // calculator
	{"playlists.update", "PUT", "/youtube/v3/playlists", 50, false},    // calculator

	{"search.list", "GET", "/youtube/v3/search", 100, false}, // calculator

	{"subscriptions.delete", "DELETE", "/youtube/v3/subscriptions", 50, false}, // calculator
	{"subscriptions.insert", "POST", "/youtube/v3/subscriptions", 50, false},   // docs/subscriptions/insert
	{"subscriptions.list", "GET", "/youtube/v3/subscriptions", 1, false},       // calculator

	{"superChatEvents.list", "GET", "/youtube/v3/superChatEvents", 1, false}, // assumed
	{"tests.insert", "POST", "/youtube/v3/tests", 50, false},                 // assumed

	{"thirdPartyLinks.delete", "DELETE", "/youtube/v3/thirdPartyLinks", 50, false}, // assumed
	{"thirdPartyLinks.insert", "POST", "/youtube/v3/thirdPartyLinks", 50, false},   // assumed
	{"thirdPartyLinks.list", "GET", "/youtube/v3/thirdPartyLinks", 1, false},       // assumed
	{"thirdPartyLinks.update", "PUT", "/youtube/v3/thirdPartyLinks", 50, false},    // assumed

	{"thumbnails.set", "POST", "/youtube/v3/thumbnails/set", 50, true}, // docs/thumbnails/set ("approximately 50")

	{"videoAbuseReportReasons.list", "GET", "/youtube/v3/videoAbuseReportReasons", 1, false}, // docs/videoAbuseReportReasons/list
	{"videoCategories.list", "GET", "/youtube/v3/videoCategories", 1, false},                 // calculator
	{"videoTrainability.get", "GET", "/youtube/v3/videoTrainability", 1, false},              // assumed

	{"videos.batchGetStats", "GET", "/youtube/v3/videos:batchGetStats", 1, false}, // docs/videos/batchGetStats
	{"videos.delete", "DELETE", "/youtube/v3/videos", 50, false},                  // calculator
	{"videos.getRating", "GET", "/youtube/v3/videos/getRating", 1, false},         // docs/videos/getRating
	{"videos.insert", "POST", "/youtube/v3/videos", 100, true},                    // history
	{"videos.list", "GET", "/youtube/v3/videos", 1, false},                        // docs/videos/list
	{"videos.rate", "POST", "/youtube/v3/videos/rate", 50, false},                 // calculator
	{"videos.reportAbuse", "POST", "/youtube/v3/videos/reportAbuse", 50, false},   // docs/videos/reportAbuse
	{"videos.update", "PUT", "/youtube/v3/videos", 50, false},                     // calculator

	{"watermarks.set", "POST", "/youtube/v3/watermarks/set", 50, true},      // docs/watermarks/set
	{"watermarks.unset", "POST", "/youtube/v3/watermarks/unset", 50, false}, // calculator
}

// ownBucket lists the methods charged to a bucket of their own instead
// of the pool: one unit a call. videos.batchGetStats has one in both
// models (it came with it); search.list and videos.insert in the granular
// one.
var ownBucket = map[string]struct {
	bucket   string
	granular bool // in the granular model only
}{
	"search.list":          {Search, true},         // https://developers.google.com/youtube/data/determine_quota_cost
	"videos.insert":        {Upload, true},         // rest/videos/insert: "1 unit in the Video Uploads quota bucket"
	"videos.batchGetStats": {BatchGetStats, false}, // docs/videos/batchGetStats; history
}

// uploadPrefixes are where the methods that take a file are also served:
// the discovery document's simple upload path (where Google's Go client
// sends every kind of upload) and its resumable one.
var uploadPrefixes = []string{"/upload", "/resumable/upload"}

// Classic returns the classic cost table: every method spends the
// project's one pool at its price (reads 1, most writes 50, search.list
// 100, captions.insert 400, captions.update 450, captions.download 200,
// liveChatMessages.list 5), but videos.batchGetStats, which came in
// 2026-06 with a bucket of its own, spends one call of BatchGetStats.
//
// videos.insert costs 100 units, what Google bills since 2025-12-04, when
// it lowered the price "from approximately 1600 units to approximately 100
// units" (revision history); the calculator still says 1,600. For the old
// price: Classic().Override("videos.insert", costs.Charge{Bucket: Pool,
// Units: 1600}).
//
// An upload is one call however many requests carry its file: the request
// that opens a resumable session (uploadType=resumable), or a simple or
// multipart upload, is charged; the chunks and status queries sent to the
// session URI (its upload_id) continue it, free and never paused, as
// endpoints named for the resource, e.g. "videos.upload". Rules set by
// Override lose that distinction (Override drops a rule's Func);
// NewTransport gives it back to the upload rules of any table it is given.
//
// The rules match the given hosts (a port, if any, is ignored), or
// DefaultHosts when none are given; pass the host of a proxy or emulator
// to meter calls sent there. The table is data: override an entry with
// costs.Spec.Override, add a default for unknown methods with its Default
// field.
func Classic(hosts ...string) costs.Spec {
	return spec([]string{Pool, BatchGetStats}, hosts, func(m method) costs.Charge {
		if b, ok := ownBucket[m.name]; ok && !b.granular {
			return costs.Charge{Bucket: b.bucket, Units: 1}
		}
		return costs.Charge{Bucket: Pool, Units: m.units}
	})
}

// Granular returns the cost table of the granular model Google moved to
// on 2026-06-01: search.list and videos.insert each spend one call of a
// bucket of their own (Search and Upload, 100 a day), videos.batchGetStats
// one call of its own (BatchGetStats, 10,000 a day), and every other
// method spends the pool at its classic price, as in Classic. Uploads are
// charged once, as in Classic. Google's own pages disagree on details;
// override what your project is billed differently.
func Granular(hosts ...string) costs.Spec {
	return spec([]string{Pool, Search, Upload, BatchGetStats}, hosts, func(m method) costs.Charge {
		if b, ok := ownBucket[m.name]; ok {
			return costs.Charge{Bucket: b.bucket, Units: 1}
		}
		return costs.Charge{Bucket: Pool, Units: m.units}
	})
}

// spec builds a table with one rule per method, path and host, and rules
// for the upload paths. Ports are dropped: requests match on the host
// alone, as in http.ServeMux.
func spec(buckets, hosts []string, charge func(method) costs.Charge) costs.Spec {
	if len(hosts) == 0 {
		hosts = DefaultHosts
	}
	s := costs.Spec{Buckets: buckets, Catalog: true}
	for _, h := range hosts {
		if host, _, err := net.SplitHostPort(h); err == nil {
			h = host
		}
		for _, m := range methods {
			s.Rules = append(s.Rules, costs.Rule{
				Pattern:  m.verb + " " + h + m.path,
				Endpoint: m.name,
				Charges:  []costs.Charge{charge(m)},
			})
		}
		for _, path := range uploadPaths() {
			for _, prefix := range uploadPrefixes {
				for _, verb := range []string{http.MethodPost, http.MethodPut} {
					r := costs.Rule{Pattern: verb + " " + h + prefix + path, Endpoint: sessionEndpoint(path)}
					if m, ok := mediaMethod(verb, path); ok {
						r.Endpoint, r.Charges = m.name, []costs.Charge{charge(m)}
					}
					r.Func = upload(r)
					s.Rules = append(s.Rules, r)
				}
			}
		}
	}
	return s
}

// uploadPaths returns the paths of the methods that take a file, each
// once, e.g. "/youtube/v3/captions" for captions.insert and update.
func uploadPaths() []string {
	var out []string
	for _, m := range methods {
		if m.media && !slices.Contains(out, m.path) {
			out = append(out, m.path)
		}
	}
	return out
}

// mediaMethod returns the method that takes a file at path with verb.
func mediaMethod(verb, path string) (method, bool) {
	for _, m := range methods {
		if m.media && m.verb == verb && m.path == path {
			return m, true
		}
	}
	return method{}, false
}

// sessionEndpoint names the requests sent to the upload sessions of a
// path: its resource and ".upload", e.g. "videos.upload" for
// "/youtube/v3/videos" and "thumbnails.upload" for
// "/youtube/v3/thumbnails/set".
func sessionEndpoint(path string) string {
	resource := strings.TrimPrefix(path, "/youtube/v3/")
	resource, _, _ = strings.Cut(resource, "/")
	return resource + ".upload"
}

// upload returns the Func of a rule for an upload path. A request to an
// upload session (a chunk or a status query, sent to the session URI,
// which carries upload_id) continues the call that opened the session:
// free, and never paused, under the name of the path's sessions. Any other
// request is a call (it opens a session, or is a simple or multipart
// upload), charged as the rule's fields say; a rule with no charges is
// there only for sessions (e.g. PUT on a path whose only upload is a
// POST), and calls to it are unknown endpoints.
//
// The resumable upload protocol:
// https://developers.google.com/youtube/v3/guides/using_resumable_upload_protocol.
func upload(r costs.Rule) func(*http.Request) (costs.Endpoint, error) {
	call := costs.Endpoint{Name: r.Endpoint, Charges: r.Charges, Free: r.Free || r.Continues, Continues: r.Continues, Settle: r.Settle}
	path, _ := uploadPath(r.Pattern)
	session := sessionEndpoint(path)
	return func(req *http.Request) (costs.Endpoint, error) {
		if inSession(req) {
			return costs.Endpoint{Name: session, Continues: true}, nil
		}
		if len(call.Charges) == 0 && !call.Free {
			host := req.Host
			if host == "" {
				host = req.URL.Host
			}
			return costs.Endpoint{}, &costs.UnknownError{Method: req.Method, Host: host, Path: req.URL.Path}
		}
		return call, nil
	}
}

// inSession reports whether a request is sent to an upload session: its
// URI carries the session's upload_id.
func inSession(req *http.Request) bool {
	return strings.Contains(req.URL.RawQuery, "upload_id=") && req.URL.Query().Get("upload_id") != ""
}

// uploadPath returns the API path of a rule's pattern on an upload path,
// e.g. "/youtube/v3/videos" for "POST youtube.googleapis.com/upload/youtube/v3/videos",
// and whether the pattern is on one: a POST or PUT under /upload/ or
// /resumable/upload/.
func uploadPath(pattern string) (string, bool) {
	verb, rest, ok := strings.Cut(pattern, " ")
	if !ok || verb != http.MethodPost && verb != http.MethodPut {
		return "", false
	}
	i := strings.IndexByte(rest, '/')
	if i < 0 {
		return "", false
	}
	for _, prefix := range uploadPrefixes {
		if p, ok := strings.CutPrefix(rest[i:], prefix+"/"); ok {
			return "/" + p, true
		}
	}
	return "", false
}

// withSessions returns spec with the upload rules that lack a Func (set by
// Override, or loaded from JSON) made to tell the requests to an upload
// session from the calls, as the rules of Classic and Granular do.
func withSessions(spec costs.Spec) costs.Spec {
	rules := slices.Clone(spec.Rules)
	for i, r := range rules {
		if _, ok := uploadPath(r.Pattern); ok && r.Func == nil {
			rules[i].Func = upload(r)
		}
	}
	spec.Rules = rules
	return spec
}
