package youtube

import (
	"net"

	"github.com/tollgate/tollgate/costs"
)

// method is one API method and its classic price.
type method struct {
	name  string // e.g. "search.list"
	verb  string // HTTP method
	path  string // under the host, e.g. "/youtube/v3/search"
	units int64  // classic cost in pool units
}

// methods is the classic price list of the YouTube Data API v3, one row per
// method and path (uploads have a second path under /upload). Prices:
// reads 1 (search.list 100, liveChatMessages.list 5, captions.list 50,
// captions.download 200), most writes 50, captions.insert 400,
// captions.update 450, videos.insert 1600 (Google lowered it to about 100
// on 2025-12-04; override it if your project is billed the new price).
var methods = []method{
	{"activities.list", "GET", "/youtube/v3/activities", 1},

	{"captions.list", "GET", "/youtube/v3/captions", 50},
	{"captions.download", "GET", "/youtube/v3/captions/{id}", 200},
	{"captions.insert", "POST", "/youtube/v3/captions", 400},
	{"captions.insert", "POST", "/upload/youtube/v3/captions", 400},
	{"captions.update", "PUT", "/youtube/v3/captions", 450},
	{"captions.update", "PUT", "/upload/youtube/v3/captions", 450},
	{"captions.delete", "DELETE", "/youtube/v3/captions", 50},

	{"channelBanners.insert", "POST", "/youtube/v3/channelBanners/insert", 50},
	{"channelBanners.insert", "POST", "/upload/youtube/v3/channelBanners/insert", 50},

	{"channels.list", "GET", "/youtube/v3/channels", 1},
	{"channels.update", "PUT", "/youtube/v3/channels", 50},

	{"channelSections.list", "GET", "/youtube/v3/channelSections", 1},
	{"channelSections.insert", "POST", "/youtube/v3/channelSections", 50},
	{"channelSections.update", "PUT", "/youtube/v3/channelSections", 50},
	{"channelSections.delete", "DELETE", "/youtube/v3/channelSections", 50},

	{"comments.list", "GET", "/youtube/v3/comments", 1},
	{"comments.insert", "POST", "/youtube/v3/comments", 50},
	{"comments.update", "PUT", "/youtube/v3/comments", 50},
	{"comments.markAsSpam", "POST", "/youtube/v3/comments/markAsSpam", 50},
	{"comments.setModerationStatus", "POST", "/youtube/v3/comments/setModerationStatus", 50},
	{"comments.delete", "DELETE", "/youtube/v3/comments", 50},

	{"commentThreads.list", "GET", "/youtube/v3/commentThreads", 1},
	{"commentThreads.insert", "POST", "/youtube/v3/commentThreads", 50},

	{"i18nLanguages.list", "GET", "/youtube/v3/i18nLanguages", 1},
	{"i18nRegions.list", "GET", "/youtube/v3/i18nRegions", 1},

	{"liveChatMessages.list", "GET", "/youtube/v3/liveChat/messages", 5},
	{"liveChatMessages.insert", "POST", "/youtube/v3/liveChat/messages", 50},
	{"liveChatMessages.delete", "DELETE", "/youtube/v3/liveChat/messages", 50},

	{"members.list", "GET", "/youtube/v3/members", 1},
	{"membershipsLevels.list", "GET", "/youtube/v3/membershipsLevels", 1},

	{"playlistItems.list", "GET", "/youtube/v3/playlistItems", 1},
	{"playlistItems.insert", "POST", "/youtube/v3/playlistItems", 50},
	{"playlistItems.update", "PUT", "/youtube/v3/playlistItems", 50},
	{"playlistItems.delete", "DELETE", "/youtube/v3/playlistItems", 50},

	{"playlists.list", "GET", "/youtube/v3/playlists", 1},
	{"playlists.insert", "POST", "/youtube/v3/playlists", 50},
	{"playlists.update", "PUT", "/youtube/v3/playlists", 50},
	{"playlists.delete", "DELETE", "/youtube/v3/playlists", 50},

	{"search.list", "GET", "/youtube/v3/search", 100},

	{"subscriptions.list", "GET", "/youtube/v3/subscriptions", 1},
	{"subscriptions.insert", "POST", "/youtube/v3/subscriptions", 50},
	{"subscriptions.delete", "DELETE", "/youtube/v3/subscriptions", 50},

	{"thumbnails.set", "POST", "/youtube/v3/thumbnails/set", 50},
	{"thumbnails.set", "POST", "/upload/youtube/v3/thumbnails/set", 50},

	{"videoAbuseReportReasons.list", "GET", "/youtube/v3/videoAbuseReportReasons", 1},
	{"videoCategories.list", "GET", "/youtube/v3/videoCategories", 1},

	{"videos.list", "GET", "/youtube/v3/videos", 1},
	{"videos.insert", "POST", "/youtube/v3/videos", 1600},
	{"videos.insert", "POST", "/upload/youtube/v3/videos", 1600},
	{"videos.update", "PUT", "/youtube/v3/videos", 50},
	{"videos.rate", "POST", "/youtube/v3/videos/rate", 50},
	{"videos.getRating", "GET", "/youtube/v3/videos/getRating", 1},
	{"videos.reportAbuse", "POST", "/youtube/v3/videos/reportAbuse", 50},
	{"videos.delete", "DELETE", "/youtube/v3/videos", 50},
	// New in 2026; it has a bucket of its own in the granular model.
	{"videos.batchGetStats", "GET", "/youtube/v3/videos:batchGetStats", 1},

	{"watermarks.set", "POST", "/youtube/v3/watermarks/set", 50},
	{"watermarks.set", "POST", "/upload/youtube/v3/watermarks/set", 50},
	{"watermarks.unset", "POST", "/youtube/v3/watermarks/unset", 50},
}

// granular lists the methods that the 2026 granular model charges to a
// bucket of their own instead of the pool: one unit a call.
var granular = map[string]string{
	"search.list":          Search,
	"videos.insert":        Upload,
	"videos.batchGetStats": BatchGetStats,
}

// Classic returns the classic cost table: every method spends the
// project's one pool, search.list 100 units, videos.insert 1600. Its rules
// match the given hosts (a port, if any, is ignored), or DefaultHosts when
// none are given; pass the host of a proxy or emulator to meter calls sent
// there.
//
// The table is data: override an entry with costs.Spec.Override, add a
// default for unknown methods with its Default field.
func Classic(hosts ...string) costs.Spec {
	return spec([]string{Pool}, hosts, func(m method) []costs.Charge {
		return []costs.Charge{{Bucket: Pool, Units: m.units}}
	})
}

// Granular returns the 2026 granular cost table: search.list and
// videos.insert each spend one call of a bucket of their own (100 a day),
// videos.batchGetStats one of its own bucket (10,000 a day), and every
// other method spends the pool at its classic price. Google's own pages
// disagree on details; override what your project is billed differently.
func Granular(hosts ...string) costs.Spec {
	return spec([]string{Pool, Search, Upload, BatchGetStats}, hosts, func(m method) []costs.Charge {
		if b, ok := granular[m.name]; ok {
			return []costs.Charge{{Bucket: b, Units: 1}}
		}
		return []costs.Charge{{Bucket: Pool, Units: m.units}}
	})
}

// spec builds a table with one rule per method, path and host. Ports are
// dropped: requests match on the host alone, as in http.ServeMux.
func spec(buckets, hosts []string, charges func(method) []costs.Charge) costs.Spec {
	if len(hosts) == 0 {
		hosts = DefaultHosts
	}
	s := costs.Spec{Buckets: buckets}
	for _, h := range hosts {
		if host, _, err := net.SplitHostPort(h); err == nil {
			h = host
		}
		for _, m := range methods {
			s.Rules = append(s.Rules, costs.Rule{
				Pattern:  m.verb + " " + h + m.path,
				Endpoint: m.name,
				Charges:  charges(m),
			})
		}
	}
	return s
}
