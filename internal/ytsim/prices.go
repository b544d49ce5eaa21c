package ytsim

// The pages that state the prices below. Each row of classicPrices names
// the page it comes from; where Google publishes no price, the row says so.
const (
	// The quota calculator's table. Its rows did not change when the
	// granular buckets came, except search.list and videos.insert.
	calculator = "https://developers.google.com/youtube/v3/determine_quota_cost"
	// The current calculator: "The search.list and videos.insert methods
	// have their own quota buckets. Each of these methods has a default
	// daily limit of 100 per day. The quota cost is 1 per call."
	granularCalculator = "https://developers.google.com/youtube/data/determine_quota_cost"
	// Revision history: 2025-12-04, videos.insert "from approximately 1600
	// units to approximately 100 units"; 2026-06-01, the granular buckets
	// for search.list and videos.insert, "all other methods" stay in the
	// existing bucket; 2026-06-03, videos.batchGetStats, "1 unit in its own
	// granular quota bucket", 10,000 units a day.
	revisionHistory = "https://developers.google.com/youtube/v3/revision_history"
	// The classic reference pages ("Quota impact: A call to this method has
	// a quota cost of N units.").
	docs = "https://developers.google.com/youtube/v3/docs/"
	// The 2026 reference pages.
	restDocs     = "https://developers.google.com/youtube/data/reference/rest/v3/"
	liveRestDocs = "https://developers.google.com/youtube/data/live/reference/rest/v3/"
	// The discovery document of google.golang.org/api v0.309.0
	// (youtube/v3/youtube-api.json, revision 20261019), whose method
	// descriptions state some prices.
	discovery = "discovery document, google.golang.org/api v0.309.0"
	// No Google page states a price: reads are taken to cost 1 and writes
	// 50, like the documented methods of the same kind.
	assumed = "assumed: no published price"
)

// Default prices and quotas.
const (
	// DefaultVideosInsertUnits is videos.insert's classic price in pool
	// units as billed since 2025-12-04, when Google lowered it "from
	// approximately 1600 units to approximately 100 units" (revision
	// history). No page states the exact figure; the calculator said 1600
	// before.
	DefaultVideosInsertUnits = 100
	// DefaultUploadQuota is videos.insert's own daily bucket in the
	// granular model, in calls.
	DefaultUploadQuota = 100
	// DefaultBatchStatsQuota is videos.batchGetStats's own daily bucket,
	// in calls (one unit each).
	DefaultBatchStatsQuota = 10000
)

// price is one method's classic price: what a call spends of the pool.
type price struct {
	method string // e.g. "videos.list"
	units  int64
	source string // the page stating it, or assumed
}

// classicPrices is every method's price in the classic model, in the
// order of the discovery document. Google charges a call its price
// whatever its answer: "All API requests, including invalid requests,
// incur a quota cost of at least one point" (calculator). videos.insert is
// Config.VideosInsertUnits; its row holds the default.
var classicPrices = []price{
	{"abuseReports.insert", 50, assumed},
	{"activities.list", 1, calculator},
	{"captions.delete", 50, calculator},
	{"captions.download", 200, docs + "captions/download"}, // not in the calculator
	{"captions.insert", 400, docs + "captions/insert"},     // the calculator agrees
	{"captions.list", 50, calculator},
	{"captions.update", 450, docs + "captions/update"}, // the calculator agrees
	{"channelBanners.insert", 50, docs + "channelBanners/insert"},
	{"channelSections.delete", 50, calculator},
	{"channelSections.insert", 50, calculator},
	{"channelSections.list", 1, docs + "channelSections/list"},
	{"channelSections.update", 50, calculator},
	{"channels.list", 1, calculator},
	{"channels.update", 50, calculator},
	{"commentThreads.insert", 50, docs + "commentThreads/insert"},
	{"commentThreads.list", 1, calculator},
	{"comments.delete", 50, calculator},
	{"comments.insert", 50, calculator},
	{"comments.list", 1, calculator},
	{"comments.markAsSpam", 50, docs + "comments/markAsSpam"}, // deprecated; not in the calculator
	{"comments.setModerationStatus", 50, calculator},
	{"comments.update", 50, calculator},
	{"i18nLanguages.list", 1, calculator},
	{"i18nRegions.list", 1, calculator},
	{"liveBroadcasts.bind", 50, assumed},
	{"liveBroadcasts.delete", 50, assumed},
	{"liveBroadcasts.insert", 50, assumed},
	{"liveBroadcasts.insertCuepoint", 50, assumed},
	{"liveBroadcasts.list", 1, assumed},
	{"liveBroadcasts.transition", 50, assumed},
	{"liveBroadcasts.update", 50, assumed},
	{"liveChatBans.delete", 50, assumed},
	{"liveChatBans.insert", 50, assumed},
	{"liveChatMessages.delete", 20, liveRestDocs + "liveChatMessages/delete"},
	{"liveChatMessages.insert", 20, liveRestDocs + "liveChatMessages/insert"},
	{"liveChatMessages.list", 5, liveRestDocs + "liveChatMessages/list"},
	{"liveChatMessages.transition", 20, discovery}, // "A call to this method has a quota cost of 20 units."
	{"liveChatModerators.delete", 50, assumed},
	{"liveChatModerators.insert", 50, assumed},
	{"liveChatModerators.list", 1, assumed},
	{"liveStreams.delete", 50, assumed},
	{"liveStreams.insert", 50, assumed},
	{"liveStreams.list", 1, assumed},
	{"liveStreams.update", 50, assumed},
	// The reference page (docs/members/list) says 2; the calculator, used
	// here like every other calculator row, says 1.
	{"members.list", 1, calculator},
	{"membershipsLevels.list", 1, docs + "membershipsLevels/list"},
	{"playlistImages.delete", 50, restDocs + "playlistImages/delete"},
	{"playlistImages.insert", 50, docs + "playlistImages/insert"},
	{"playlistImages.list", 1, docs + "playlistImages/list"},
	{"playlistImages.update", 50, restDocs + "playlistImages/update"},
	{"playlistItems.delete", 50, calculator},
	{"playlistItems.insert", 50, calculator},
	{"playlistItems.list", 1, calculator},
	{"playlistItems.update", 50, calculator},
	{"playlists.delete", 50, calculator},
	{"playlists.insert", 50, calculator},
	{"playlists.list", 1, calculator},
	{"playlists.update", 50, calculator},
	{"search.list", 100, calculator}, // the calculator before 2026-06
	{"subscriptions.delete", 50, calculator},
	{"subscriptions.insert", 50, docs + "subscriptions/insert"},
	{"subscriptions.list", 1, calculator},
	{"superChatEvents.list", 1, assumed},
	{"tests.insert", 50, assumed},
	{"thirdPartyLinks.delete", 50, assumed},
	{"thirdPartyLinks.insert", 50, assumed},
	{"thirdPartyLinks.list", 1, assumed},
	{"thirdPartyLinks.update", 50, assumed},
	{"thumbnails.set", 50, docs + "thumbnails/set"}, // "approximately 50"; the calculator says 50
	{"videoAbuseReportReasons.list", 1, docs + "videoAbuseReportReasons/list"},
	{"videoCategories.list", 1, calculator},
	{"videoTrainability.get", 1, assumed},
	{"videos.batchGetStats", 1, docs + "videos/batchGetStats"},
	{"videos.delete", 50, calculator},
	{"videos.getRating", 1, docs + "videos/getRating"},
	{"videos.insert", DefaultVideosInsertUnits, revisionHistory}, // 2025-12-04; Config.VideosInsertUnits
	{"videos.list", 1, docs + "videos/list"},
	{"videos.rate", 50, calculator},
	{"videos.reportAbuse", 50, docs + "videos/reportAbuse"},
	{"videos.update", 50, calculator},
	{"watermarks.set", 50, docs + "watermarks/set"},
	{"watermarks.unset", 50, calculator},
	{"youtube.v3.liveChat.messages.stream", 5, liveRestDocs + "liveChatMessages/streamList"},
}

// ownBucket is where the methods that have a bucket of their own are
// charged: one call, one unit, whatever the classic price. search.list
// and videos.insert have one in the granular model (from 2026-06); every
// other method spends the pool at its classic price there: "calls to all
// other methods are charged to the existing quota bucket" (revision
// history, 2026-06-01, translated from the German copy).
// videos.batchGetStats came after (2026-06-03) with a bucket of its own,
// and has no other price, so it spends its bucket in both models.
var ownBucket = map[string]struct {
	bucket   string
	granular bool // in the granular model only
	source   string
}{
	"search.list":          {Search, true, granularCalculator},
	"videos.insert":        {Upload, true, restDocs + "videos/insert"}, // "1 unit in the Video Uploads quota bucket"
	"videos.batchGetStats": {BatchGetStats, false, revisionHistory},    // 2026-06-03
}

// charge is what one call of a method spends: units of one bucket.
type charge struct {
	bucket string
	units  int64
}

// priceList returns every method's charge in the model cfg selects, by
// method name.
func priceList(cfg Config) map[string]charge {
	out := make(map[string]charge, len(classicPrices))
	for _, p := range classicPrices {
		c := charge{Pool, p.units}
		if p.method == "videos.insert" && cfg.VideosInsertUnits > 0 {
			c.units = cfg.VideosInsertUnits
		}
		if b, ok := ownBucket[p.method]; ok && (cfg.Granular || !b.granular) {
			c = charge{b.bucket, 1}
		}
		out[p.method] = c
	}
	return out
}
