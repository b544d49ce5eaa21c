package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// What one regional pass fetches, as a trending-ingestion job does.
const (
	maxPages      = 4  // videos.list pages of the chart per pass
	pageSize      = 50 // videos per page (the API's maximum)
	channelsBatch = 50 // channel ids per channels.list call (the API's maximum)
	searchResults = 25
)

// api calls the YouTube Data API through the metered client.
type api struct {
	client *http.Client
	base   string // e.g. https://youtube.googleapis.com/youtube/v3
}

// videoPage is the part of a videos.list response the job reads.
type videoPage struct {
	NextPageToken string `json:"nextPageToken"`
	Items         []struct {
		ID      string `json:"id"`
		Snippet struct {
			ChannelID string `json:"channelId"`
		} `json:"snippet"`
	} `json:"items"`
}

// itemList is the part of channels.list and search.list responses it reads.
type itemList struct {
	Items []json.RawMessage `json:"items"`
}

// get calls one method and decodes its JSON. The region rides in the
// context, for the decision hook.
func (a *api) get(ctx context.Context, resource string, params url.Values, into any) error {
	req, err := http.NewRequestWithContext(ctx, "GET", a.base+"/"+resource+"?"+params.Encode(), nil)
	if err != nil {
		return err
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s: %s: %s", resource, resp.Status, strings.TrimSpace(string(b)))
	}
	return json.NewDecoder(resp.Body).Decode(into)
}

// passResult is what one pass fetched.
type passResult struct {
	videos, channels, calls int
}

// pass runs one region's ingestion pass: the trending chart page by page,
// the channels seen in it by batches, and one search. It stops at the first
// error, returning what it fetched so far.
func (a *api) pass(ctx context.Context, region string) (passResult, error) {
	var res passResult
	seen := map[string]bool{}
	token := ""
	for range maxPages {
		params := url.Values{
			"part": {"snippet,statistics"}, "chart": {"mostPopular"},
			"regionCode": {region}, "maxResults": {fmt.Sprint(pageSize)},
		}
		if token != "" {
			params.Set("pageToken", token)
		}
		var page videoPage
		res.calls++
		if err := a.get(ctx, "videos", params, &page); err != nil {
			return res, fmt.Errorf("videos.list: %w", err)
		}
		res.videos += len(page.Items)
		for _, v := range page.Items {
			seen[v.Snippet.ChannelID] = true
		}
		if token = page.NextPageToken; token == "" {
			break
		}
	}

	ids := make([]string, 0, len(seen))
	for id := range seen {
		if id != "" {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for batch := range slices.Chunk(ids, channelsBatch) {
		var list itemList
		res.calls++
		params := url.Values{"part": {"snippet,statistics"}, "id": {strings.Join(batch, ",")}}
		if err := a.get(ctx, "channels", params, &list); err != nil {
			return res, fmt.Errorf("channels.list: %w", err)
		}
		res.channels += len(list.Items)
	}

	var found itemList
	res.calls++
	params := url.Values{
		"part": {"snippet"}, "q": {"trending"}, "type": {"video"},
		"regionCode": {region}, "maxResults": {fmt.Sprint(searchResults)},
	}
	if err := a.get(ctx, "search", params, &found); err != nil {
		return res, fmt.Errorf("search.list: %w", err)
	}
	return res, nil
}

// stopped reports whether err only means the run is over: the -duration
// passed or the user interrupted it.
func stopped(ctx context.Context, err error) bool {
	return ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))
}
