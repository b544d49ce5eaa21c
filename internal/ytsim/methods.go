package ytsim

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// method is one method of the API, as Google's Go client calls it.
type method struct {
	// name is the discovery id without its leading "youtube.", e.g.
	// "videos.list"; the live chat stream keeps the rest of its odd id:
	// "youtube.v3.liveChat.messages.stream".
	name string
	verb string // the HTTP method
	path string // e.g. "/youtube/v3/videos"; "{id}" is a path parameter
	// media is true for the methods that take a file: they are also served
	// under "/upload" + path and "/resumable/upload" + path.
	media bool
	shape shape  // what a successful call answers
	kind  string // the answer's kind, e.g. "youtube#video"; "" when it has none
}

// shape is the form of a successful answer.
type shape int

const (
	simulated     shape = iota // content from the synthetic catalogue (see readers)
	list                       // {"kind":…,"etag":…,"items":[]}
	resource                   // the resource sent, with kind, etag and an id
	resourceNoID               // the same, for the resources that have no id
	noContent                  // 204, as for every method without a response body
	mediaDownload              // the bytes of a caption track
)

// readers are the methods answered with synthetic content.
var readers = map[string]func(*http.Request) reply{
	"videos.list":   videosList,
	"channels.list": channelsList,
	"search.list":   searchList,
}

// methods is every method of the discovery document of
// google.golang.org/api v0.309.0 (youtube/v3/youtube-api.json, revision
// 20261019), in its order. A request is one of them by HTTP method and
// path, as in the discovery document; uploads also by the /upload path
// the Go client sends them to.
var methods = []method{
	{"abuseReports.insert", "POST", "/youtube/v3/abuseReports", false, resourceNoID, ""},
	{"activities.list", "GET", "/youtube/v3/activities", false, list, "youtube#activityListResponse"},
	{"captions.delete", "DELETE", "/youtube/v3/captions", false, noContent, ""},
	{"captions.download", "GET", "/youtube/v3/captions/{id}", false, mediaDownload, ""},
	{"captions.insert", "POST", "/youtube/v3/captions", true, resource, "youtube#caption"},
	{"captions.list", "GET", "/youtube/v3/captions", false, list, "youtube#captionListResponse"},
	{"captions.update", "PUT", "/youtube/v3/captions", true, resource, "youtube#caption"},
	{"channelBanners.insert", "POST", "/youtube/v3/channelBanners/insert", true, resourceNoID, "youtube#channelBannerResource"},
	{"channelSections.delete", "DELETE", "/youtube/v3/channelSections", false, noContent, ""},
	{"channelSections.insert", "POST", "/youtube/v3/channelSections", false, resource, "youtube#channelSection"},
	{"channelSections.list", "GET", "/youtube/v3/channelSections", false, list, "youtube#channelSectionListResponse"},
	{"channelSections.update", "PUT", "/youtube/v3/channelSections", false, resource, "youtube#channelSection"},
	{"channels.list", "GET", "/youtube/v3/channels", false, simulated, ""},
	{"channels.update", "PUT", "/youtube/v3/channels", false, resource, "youtube#channel"},
	{"commentThreads.insert", "POST", "/youtube/v3/commentThreads", false, resource, "youtube#commentThread"},
	{"commentThreads.list", "GET", "/youtube/v3/commentThreads", false, list, "youtube#commentThreadListResponse"},
	{"comments.delete", "DELETE", "/youtube/v3/comments", false, noContent, ""},
	{"comments.insert", "POST", "/youtube/v3/comments", false, resource, "youtube#comment"},
	{"comments.list", "GET", "/youtube/v3/comments", false, list, "youtube#commentListResponse"},
	{"comments.markAsSpam", "POST", "/youtube/v3/comments/markAsSpam", false, noContent, ""},
	{"comments.setModerationStatus", "POST", "/youtube/v3/comments/setModerationStatus", false, noContent, ""},
	{"comments.update", "PUT", "/youtube/v3/comments", false, resource, "youtube#comment"},
	{"i18nLanguages.list", "GET", "/youtube/v3/i18nLanguages", false, list, "youtube#i18nLanguageListResponse"},
	{"i18nRegions.list", "GET", "/youtube/v3/i18nRegions", false, list, "youtube#i18nRegionListResponse"},
	{"liveBroadcasts.bind", "POST", "/youtube/v3/liveBroadcasts/bind", false, resource, "youtube#liveBroadcast"},
	{"liveBroadcasts.delete", "DELETE", "/youtube/v3/liveBroadcasts", false, noContent, ""},
	{"liveBroadcasts.insert", "POST", "/youtube/v3/liveBroadcasts", false, resource, "youtube#liveBroadcast"},
	{"liveBroadcasts.insertCuepoint", "POST", "/youtube/v3/liveBroadcasts/cuepoint", false, resource, ""},
	{"liveBroadcasts.list", "GET", "/youtube/v3/liveBroadcasts", false, list, "youtube#liveBroadcastListResponse"},
	{"liveBroadcasts.transition", "POST", "/youtube/v3/liveBroadcasts/transition", false, resource, "youtube#liveBroadcast"},
	{"liveBroadcasts.update", "PUT", "/youtube/v3/liveBroadcasts", false, resource, "youtube#liveBroadcast"},
	{"liveChatBans.delete", "DELETE", "/youtube/v3/liveChat/bans", false, noContent, ""},
	{"liveChatBans.insert", "POST", "/youtube/v3/liveChat/bans", false, resource, "youtube#liveChatBan"},
	{"liveChatMessages.delete", "DELETE", "/youtube/v3/liveChat/messages", false, noContent, ""},
	{"liveChatMessages.insert", "POST", "/youtube/v3/liveChat/messages", false, resource, "youtube#liveChatMessage"},
	{"liveChatMessages.list", "GET", "/youtube/v3/liveChat/messages", false, list, "youtube#liveChatMessageListResponse"},
	{"liveChatMessages.transition", "POST", "/youtube/v3/liveChat/messages/transition", false, resource, "youtube#liveChatMessage"},
	{"liveChatModerators.delete", "DELETE", "/youtube/v3/liveChat/moderators", false, noContent, ""},
	{"liveChatModerators.insert", "POST", "/youtube/v3/liveChat/moderators", false, resource, "youtube#liveChatModerator"},
	{"liveChatModerators.list", "GET", "/youtube/v3/liveChat/moderators", false, list, "youtube#liveChatModeratorListResponse"},
	{"liveStreams.delete", "DELETE", "/youtube/v3/liveStreams", false, noContent, ""},
	{"liveStreams.insert", "POST", "/youtube/v3/liveStreams", false, resource, "youtube#liveStream"},
	{"liveStreams.list", "GET", "/youtube/v3/liveStreams", false, list, "youtube#liveStreamListResponse"},
	{"liveStreams.update", "PUT", "/youtube/v3/liveStreams", false, resource, "youtube#liveStream"},
	{"members.list", "GET", "/youtube/v3/members", false, list, "youtube#memberListResponse"},
	{"membershipsLevels.list", "GET", "/youtube/v3/membershipsLevels", false, list, "youtube#membershipsLevelListResponse"},
	{"playlistImages.delete", "DELETE", "/youtube/v3/playlistImages", false, noContent, ""},
	{"playlistImages.insert", "POST", "/youtube/v3/playlistImages", true, resource, "youtube#playlistImage"},
	{"playlistImages.list", "GET", "/youtube/v3/playlistImages", false, list, "youtube#playlistImageListResponse"},
	{"playlistImages.update", "PUT", "/youtube/v3/playlistImages", true, resource, "youtube#playlistImage"},
	{"playlistItems.delete", "DELETE", "/youtube/v3/playlistItems", false, noContent, ""},
	{"playlistItems.insert", "POST", "/youtube/v3/playlistItems", false, resource, "youtube#playlistItem"},
	{"playlistItems.list", "GET", "/youtube/v3/playlistItems", false, list, "youtube#playlistItemListResponse"},
	{"playlistItems.update", "PUT", "/youtube/v3/playlistItems", false, resource, "youtube#playlistItem"},
	{"playlists.delete", "DELETE", "/youtube/v3/playlists", false, noContent, ""},
	{"playlists.insert", "POST", "/youtube/v3/playlists", false, resource, "youtube#playlist"},
	{"playlists.list", "GET", "/youtube/v3/playlists", false, list, "youtube#playlistListResponse"},
	{"playlists.update", "PUT", "/youtube/v3/playlists", false, resource, "youtube#playlist"},
	{"search.list", "GET", "/youtube/v3/search", false, simulated, ""},
	{"subscriptions.delete", "DELETE", "/youtube/v3/subscriptions", false, noContent, ""},
	{"subscriptions.insert", "POST", "/youtube/v3/subscriptions", false, resource, "youtube#subscription"},
	{"subscriptions.list", "GET", "/youtube/v3/subscriptions", false, list, "youtube#subscriptionListResponse"},
	{"superChatEvents.list", "GET", "/youtube/v3/superChatEvents", false, list, "youtube#superChatEventListResponse"},
	{"tests.insert", "POST", "/youtube/v3/tests", false, resource, ""},
	{"thirdPartyLinks.delete", "DELETE", "/youtube/v3/thirdPartyLinks", false, noContent, ""},
	{"thirdPartyLinks.insert", "POST", "/youtube/v3/thirdPartyLinks", false, resourceNoID, "youtube#thirdPartyLink"},
	{"thirdPartyLinks.list", "GET", "/youtube/v3/thirdPartyLinks", false, list, "youtube#thirdPartyLinkListResponse"},
	{"thirdPartyLinks.update", "PUT", "/youtube/v3/thirdPartyLinks", false, resourceNoID, "youtube#thirdPartyLink"},
	{"thumbnails.set", "POST", "/youtube/v3/thumbnails/set", true, list, "youtube#thumbnailSetResponse"},
	{"videoAbuseReportReasons.list", "GET", "/youtube/v3/videoAbuseReportReasons", false, list, "youtube#videoAbuseReportReasonListResponse"},
	{"videoCategories.list", "GET", "/youtube/v3/videoCategories", false, list, "youtube#videoCategoryListResponse"},
	{"videoTrainability.get", "GET", "/youtube/v3/videoTrainability", false, resourceNoID, "youtube#videoTrainability"},
	{"videos.batchGetStats", "GET", "/youtube/v3/videos:batchGetStats", false, list, "youtube#batchGetStatsResponse"},
	{"videos.delete", "DELETE", "/youtube/v3/videos", false, noContent, ""},
	{"videos.getRating", "GET", "/youtube/v3/videos/getRating", false, list, "youtube#videoGetRatingResponse"},
	{"videos.insert", "POST", "/youtube/v3/videos", true, resource, "youtube#video"},
	{"videos.list", "GET", "/youtube/v3/videos", false, simulated, ""},
	{"videos.rate", "POST", "/youtube/v3/videos/rate", false, noContent, ""},
	{"videos.reportAbuse", "POST", "/youtube/v3/videos/reportAbuse", false, noContent, ""},
	{"videos.update", "PUT", "/youtube/v3/videos", false, resource, "youtube#video"},
	{"watermarks.set", "POST", "/youtube/v3/watermarks/set", true, noContent, ""},
	{"watermarks.unset", "POST", "/youtube/v3/watermarks/unset", false, noContent, ""},
	{"youtube.v3.liveChat.messages.stream", "GET", "/youtube/v3/liveChat/messages/stream", false, list, "youtube#liveChatMessageListResponse"},
}

// answer is a successful call's answer: what the method answers, built
// from the request's query and resource (the JSON body, or the metadata
// part of an upload). id numbers the resources the Server creates.
func (m *method) answer(r *http.Request, body []byte, id uint64) reply {
	switch m.shape {
	case simulated:
		return readers[m.name](r)
	case list:
		return jsonReply(http.StatusOK, emptyList{Kind: m.kind, Etag: etag("list", m.name), Items: []struct{}{}})
	case resource, resourceNoID:
		return m.resource(r.URL.Query(), body, id)
	case mediaDownload:
		return reply{
			status:      http.StatusOK,
			contentType: "text/plain; charset=UTF-8",
			body:        []byte("1\n00:00:00,000 --> 00:00:02,000\nA simulated caption.\n"),
		}
	default: // noContent
		return reply{status: http.StatusNoContent}
	}
}

// emptyList is a list answer with no items.
type emptyList struct {
	Kind  string     `json:"kind"`
	Etag  string     `json:"etag"`
	Items []struct{} `json:"items"`
}

// maxResource is the largest resource the Server reads from a request and
// sends back; larger ones are charged and answered without their fields.
const maxResource = 64 << 10

// resource answers an insert, update or action with the resource sent, as
// YouTube does: the fields of body (a JSON object, or empty), under its
// kind, a new etag and its id: the body's own, else the id parameter
// (liveBroadcasts.bind names the broadcast so), else a new one.
func (m *method) resource(q url.Values, body []byte, id uint64) reply {
	fields := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(body)) > 0 && len(body) <= maxResource {
		if err := json.Unmarshal(body, &fields); err != nil {
			return apiError(http.StatusBadRequest, "global", "parseError", "Parse Error", "")
		}
	}
	head := map[string]string{}
	if m.kind != "" {
		head["kind"] = m.kind
	}
	if m.shape == resource {
		if raw, ok := fields["id"]; ok {
			var s string
			if json.Unmarshal(raw, &s) == nil {
				head["id"] = s
			}
		}
		if head["id"] == "" {
			head["id"] = q.Get("id")
		}
		if head["id"] == "" {
			head["id"] = newID(m.name, id)
		}
	}
	head["etag"] = etag("resource", m.name, head["id"], string(body))
	for k := range head {
		delete(fields, k)
	}

	// kind, etag and id first, as YouTube sends them; then the rest.
	var buf bytes.Buffer
	buf.WriteByte('{')
	n := 0
	add := func(k string, v []byte) {
		if n > 0 {
			buf.WriteByte(',')
		}
		n++
		buf.WriteString(strconv.Quote(k))
		buf.WriteByte(':')
		buf.Write(v)
	}
	for _, k := range []string{"kind", "etag", "id"} {
		if v, ok := head[k]; ok {
			b, _ := json.Marshal(v) // strings always encode
			add(k, b)
		}
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		var compact bytes.Buffer
		if err := json.Compact(&compact, fields[k]); err != nil {
			continue // unreachable: Unmarshal checked the syntax
		}
		add(k, compact.Bytes())
	}
	buf.WriteByte('}')
	return reply{status: http.StatusOK, body: buf.Bytes()}
}

// newID names the n-th resource a Server creates: 11 characters for a
// video, like YouTube's, 22 for anything else.
func newID(method string, n uint64) string {
	id := etag("id", method, strconv.FormatUint(n, 10))
	if strings.HasPrefix(method, "videos.") {
		return id[:11]
	}
	return id
}
