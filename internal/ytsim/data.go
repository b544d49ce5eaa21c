package ytsim

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The synthetic catalogue. Everything is derived by hashing names, so the
// same request returns the same bytes on every Server, without state.
const (
	videosPerRegion   = 200 // the mostPopular chart of every region: 4 pages of 50
	channelsPerRegion = 40  // channel slots per region: a job sees channels repeat
	sharedChannels    = 16  // slots 0..15 are the same channels in every region
)

// sum64 hashes parts, separated so that ("ab","c") and ("a","bc") differ.
// FNV's low bits depend only on the inputs' low bits, so small moduli of a
// raw sum are badly spread (24 of 40 channel slots used, not 40); the
// finalizer of MurmurHash3 mixes every bit into every other.
func sum64(parts ...string) uint64 {
	h := fnv.New64a()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	x := h.Sum64()
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// sum128 is sum64 with 128 bits, for channel ids and etags.
func sum128(parts ...string) []byte {
	h := fnv.New128a()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return h.Sum(nil)
}

// pick chooses one of words by a hash of parts.
func pick(words []string, parts ...string) string {
	return words[sum64(parts...)%uint64(len(words))]
}

// etag is 22 opaque characters, like YouTube's.
func etag(parts ...string) string {
	return base64.RawURLEncoding.EncodeToString(sum128(parts...))
}

// listEtag changes whenever the items or the page links change.
func listEtag(kind, links string, items any) string {
	b, _ := json.Marshal(items) // our item types always encode
	return etag("list", kind, links, string(b))
}

// partsKey names the parts requested, for item etags: YouTube's etag of a
// resource depends on the parts returned.
func partsKey(parts map[string]bool) string {
	var names []string
	for p := range parts {
		names = append(names, p)
	}
	slices.Sort(names)
	return strings.Join(names, ",")
}

var (
	adjectives = []string{"Midnight", "Golden", "Electric", "Silent", "Neon", "Wild", "Broken", "Endless",
		"Crimson", "Paper", "Velvet", "Lucky", "Hidden", "Frozen", "Summer", "Cosmic"}
	nouns = []string{"Echo", "Harbor", "River", "Signal", "Garden", "Skyline", "Engine", "Lantern",
		"Mirror", "Orbit", "Canyon", "Tide", "Ember", "Atlas", "Meadow", "Circuit"}
	forms = []string{"(Official Video)", "- Full Match Highlights", "| Behind the Scenes", "(Live Session)",
		"- Official Trailer", "Explained in 10 Minutes", "World Record Speedrun", "(Lyric Video)"}
	channelKinds = []string{"Music", "TV", "Gaming", "Studios", "News", "Kitchen", "Labs", "Sports",
		"Official", "Records", "Daily", "Academy"}
	categories = []string{"1", "2", "10", "15", "17", "20", "22", "23", "24", "25", "26", "27", "28"}
)

// videoEpoch and channelEpoch bound the synthetic publication dates.
var (
	videoEpoch   = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	channelEpoch = time.Date(2006, 1, 1, 0, 0, 0, 0, time.UTC)
)

// dateFrom returns a second between epoch and epoch+span chosen by parts,
// formatted as YouTube does ("2026-03-04T05:06:07Z").
func dateFrom(epoch time.Time, span time.Duration, parts ...string) string {
	s := sum64(parts...) % uint64(span/time.Second)
	return epoch.Add(time.Duration(s) * time.Second).Format(time.RFC3339)
}

type thumbnails struct {
	Default thumbnail `json:"default"`
}

type thumbnail struct {
	URL    string `json:"url"`
	Width  int    `json:"width"`
	Height int    `json:"height"`
}

type video struct {
	Kind       string        `json:"kind"`
	Etag       string        `json:"etag"`
	ID         string        `json:"id"`
	Snippet    *videoSnippet `json:"snippet,omitempty"`
	Statistics *videoStats   `json:"statistics,omitempty"`
}

type videoSnippet struct {
	PublishedAt  string     `json:"publishedAt"`
	ChannelID    string     `json:"channelId"`
	Title        string     `json:"title"`
	Description  string     `json:"description"`
	Thumbnails   thumbnails `json:"thumbnails"`
	ChannelTitle string     `json:"channelTitle"`
	CategoryID   string     `json:"categoryId"`
}

// videoStats holds counts as decimal strings, as YouTube sends them.
type videoStats struct {
	ViewCount    string `json:"viewCount"`
	LikeCount    string `json:"likeCount"`
	CommentCount string `json:"commentCount"`
}

type channel struct {
	Kind       string          `json:"kind"`
	Etag       string          `json:"etag"`
	ID         string          `json:"id"`
	Snippet    *channelSnippet `json:"snippet,omitempty"`
	Statistics *channelStats   `json:"statistics,omitempty"`
}

type channelSnippet struct {
	Title       string `json:"title"`
	Description string `json:"description"`
	PublishedAt string `json:"publishedAt"`
}

type channelStats struct {
	ViewCount       string `json:"viewCount"`
	SubscriberCount string `json:"subscriberCount"`
	VideoCount      string `json:"videoCount"`
}

type searchResult struct {
	Kind    string         `json:"kind"`
	Etag    string         `json:"etag"`
	ID      searchID       `json:"id"`
	Snippet *searchSnippet `json:"snippet,omitempty"`
}

type searchID struct {
	Kind      string `json:"kind"`
	VideoID   string `json:"videoId,omitempty"`
	ChannelID string `json:"channelId,omitempty"`
}

type searchSnippet struct {
	PublishedAt          string     `json:"publishedAt"`
	ChannelID            string     `json:"channelId"`
	Title                string     `json:"title"`
	Description          string     `json:"description"`
	Thumbnails           thumbnails `json:"thumbnails"`
	ChannelTitle         string     `json:"channelTitle"`
	LiveBroadcastContent string     `json:"liveBroadcastContent"`
	PublishTime          string     `json:"publishTime"`
}

// videoRef is a place on a region's chart: region "US", index 0..199.
type videoRef struct {
	region string
	index  int
}

// id returns the video's 11-character id. It is not a bare hash: it
// carries the region and index, masked and checked, so that videos.list by
// id can find any chart video without a table of every region's videos.
// Layout (8 bytes, base64url): payload^mask(3) check(5), where payload is
// the region's two letters and the index, check a hash of the payload and
// mask a hash of check.
func (v videoRef) id() string {
	payload := []byte{v.region[0], v.region[1], byte(v.index)}
	check := videoCheck(payload)
	mask := videoMask(check)
	b := make([]byte, 0, 8)
	for i := range payload {
		b = append(b, payload[i]^mask[i])
	}
	b = append(b, check...)
	return base64.RawURLEncoding.EncodeToString(b)
}

func videoCheck(payload []byte) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], sum64("video", string(payload)))
	return b[:5]
}

func videoMask(check []byte) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], sum64("mask", string(check)))
	return b[:3]
}

// parseVideoID reverses id; ok is false for ids the catalogue lacks.
func parseVideoID(id string) (v videoRef, ok bool) {
	b, err := base64.RawURLEncoding.Strict().DecodeString(id)
	if err != nil || len(id) != 11 || len(b) != 8 {
		return videoRef{}, false
	}
	check, mask := b[3:], videoMask(b[3:])
	payload := []byte{b[0] ^ mask[0], b[1] ^ mask[1], b[2] ^ mask[2]}
	if string(videoCheck(payload)) != string(check) {
		return videoRef{}, false
	}
	v = videoRef{region: string(payload[:2]), index: int(payload[2])}
	for _, c := range payload[:2] {
		if c < 'A' || c > 'Z' {
			return videoRef{}, false
		}
	}
	return v, v.index < videosPerRegion
}

func (v videoRef) key() string { return v.region + "/" + strconv.Itoa(v.index) }

// channelID returns the video's channel: one of the region's slots.
func (v videoRef) channelID() string {
	return regionChannelID(v.region, int(sum64("slot", v.key())%channelsPerRegion))
}

// regionChannelID returns the channel in a region's slot; the first
// sharedChannels slots hold the same channels in every region.
func regionChannelID(region string, slot int) string {
	key := "shared/" + strconv.Itoa(slot)
	if slot >= sharedChannels {
		key = "region/" + region + "/" + strconv.Itoa(slot)
	}
	return "UC" + base64.RawURLEncoding.EncodeToString(sum128("channel", key))
}

// validChannelID reports whether id looks like a channel id: "UC" and 22
// base64url characters holding 16 bytes.
func validChannelID(id string) bool {
	rest, ok := strings.CutPrefix(id, "UC")
	if !ok || len(rest) != 22 {
		return false
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(rest)
	return err == nil && len(b) == 16
}

func (v videoRef) title() string {
	k := v.key()
	return pick(adjectives, "title1", k) + " " + pick(nouns, "title2", k) + " " + pick(forms, "title3", k)
}

func (v videoRef) description() string {
	return fmt.Sprintf("Simulated video #%d of the %s most-popular chart.", v.index+1, v.region)
}

func (v videoRef) snippet() *videoSnippet {
	id, ch := v.id(), v.channelID()
	return &videoSnippet{
		PublishedAt: dateFrom(videoEpoch, 120*24*time.Hour, "published", v.key()),
		ChannelID:   ch,
		Title:       v.title(),
		Description: v.description(),
		Thumbnails: thumbnails{Default: thumbnail{
			URL: "https://i.ytimg.com/vi/" + id + "/default.jpg", Width: 120, Height: 90}},
		ChannelTitle: channelTitle(ch),
		CategoryID:   pick(categories, "category", v.key()),
	}
}

// statistics falls with chart position, as popularity should.
func (v videoRef) statistics() *videoStats {
	k := v.key()
	views := uint64(videosPerRegion-v.index)*250_000 + sum64("views", k)%250_000
	likes := views / (20 + sum64("likes", k)%40)
	comments := likes / (10 + sum64("comments", k)%40)
	return &videoStats{
		ViewCount:    strconv.FormatUint(views, 10),
		LikeCount:    strconv.FormatUint(likes, 10),
		CommentCount: strconv.FormatUint(comments, 10),
	}
}

// resource returns the video as videos.list does, with the parts asked.
func (v videoRef) resource(parts map[string]bool) video {
	id := v.id()
	out := video{Kind: "youtube#video", Etag: etag("video", id, partsKey(parts)), ID: id}
	if parts["snippet"] {
		out.Snippet = v.snippet()
	}
	if parts["statistics"] {
		out.Statistics = v.statistics()
	}
	return out
}

// searchResult returns the video as search.list does.
func (v videoRef) searchResult(parts map[string]bool) searchResult {
	id := v.id()
	out := searchResult{
		Kind: "youtube#searchResult",
		Etag: etag("search", id, partsKey(parts)),
		ID:   searchID{Kind: "youtube#video", VideoID: id},
	}
	if parts["snippet"] {
		sn := v.snippet()
		out.Snippet = &searchSnippet{
			PublishedAt:          sn.PublishedAt,
			ChannelID:            sn.ChannelID,
			Title:                sn.Title,
			Description:          sn.Description,
			Thumbnails:           sn.Thumbnails,
			ChannelTitle:         sn.ChannelTitle,
			LiveBroadcastContent: "none",
			PublishTime:          sn.PublishedAt,
		}
	}
	return out
}

// channelTitle is derived from the id alone, so a video's channelTitle and
// channels.list agree.
func channelTitle(id string) string {
	return pick(adjectives, "channel1", id) + " " + pick(nouns, "channel2", id) + " " + pick(channelKinds, "channel3", id)
}

func channelSnippetOf(id string) *channelSnippet {
	t := channelTitle(id)
	return &channelSnippet{
		Title:       t,
		Description: "Simulated channel " + t + ".",
		PublishedAt: dateFrom(channelEpoch, 19*365*24*time.Hour, "channelPublished", id),
	}
}

// channelResource returns the channel as channels.list does.
func channelResource(id string, parts map[string]bool) channel {
	out := channel{Kind: "youtube#channel", Etag: etag("channel", id, partsKey(parts)), ID: id}
	if parts["snippet"] {
		out.Snippet = channelSnippetOf(id)
	}
	if parts["statistics"] {
		subs := 1_000 + sum64("subscribers", id)%50_000_000
		out.Statistics = &channelStats{
			ViewCount:       strconv.FormatUint(subs*(50+sum64("channelViews", id)%200), 10),
			SubscriberCount: strconv.FormatUint(subs, 10),
			VideoCount:      strconv.FormatUint(10+sum64("videoCount", id)%3000, 10),
		}
	}
	return out
}

// channelSearchResult returns the channel as search.list does.
func channelSearchResult(id string, parts map[string]bool) searchResult {
	out := searchResult{
		Kind: "youtube#searchResult",
		Etag: etag("search", id, partsKey(parts)),
		ID:   searchID{Kind: "youtube#channel", ChannelID: id},
	}
	if parts["snippet"] {
		sn := channelSnippetOf(id)
		out.Snippet = &searchSnippet{
			PublishedAt: sn.PublishedAt,
			ChannelID:   id,
			Title:       sn.Title,
			Description: sn.Description,
			Thumbnails: thumbnails{Default: thumbnail{
				URL: "https://yt3.ggpht.com/" + id + "=s88", Width: 88, Height: 88}},
			ChannelTitle:         sn.Title,
			LiveBroadcastContent: "none",
			PublishTime:          sn.PublishedAt,
		}
	}
	return out
}

// strides are the steps that visit every index of a list of 200 (or 40)
// once: the numbers below 200 prime to 2 and 5.
var strides = func() []uint64 {
	var out []uint64
	for n := uint64(1); n < videosPerRegion; n++ {
		if n%2 != 0 && n%5 != 0 {
			out = append(out, n)
		}
	}
	return out
}()

// searchOrder returns the index of search result k of total: a walk over
// the region's list fixed by the query, so different queries see the same
// catalogue in different orders. The empty query walks it in chart order.
func searchOrder(region, query string, total, k int) int {
	if query == "" {
		return k
	}
	h := sum64("search", region, query)
	start, stride := h%uint64(total), strides[(h>>32)%uint64(len(strides))]
	return int((start + uint64(k)*stride) % uint64(total))
}
