<?php
// The blog post's cron job, in PHP: every pass fetches the most popular
// videos of eight regions (videos.list chart=mostPopular, 1 unit each),
// and every third pass also runs a search (search.list, 100 units).
//
// It reaches YouTube through tollgate's gateway (`tollgate serve`): the
// base URL is the gateway's /youtube/ prefix, and where the script would
// put its Google API key it puts its caller token instead. The gateway
// swaps in the real key and spends the quota the Go workers share.
//
// Environment: GATEWAY (e.g. http://127.0.0.1:8787), TOLLGATE_TOKEN, PASSES.
// Prints one JSON object: what it sent and what came back.

$base = getenv('GATEWAY') . '/youtube/v3';
$token = getenv('TOLLGATE_TOKEN');
$passes = (int) getenv('PASSES');
$regions = ['US', 'GB', 'DE', 'FR', 'JP', 'BR', 'IN', 'KR'];

$report = ['requests' => 0, 'ok' => 0, 'videos' => 0, 'searches' => 0,
           'status' => new stdClass(), 'errors' => []];

// get sends one GET and returns its status and decoded body.
function get(string $url, array $headers): array {
    $ch = curl_init($url);
    curl_setopt_array($ch, [
        CURLOPT_RETURNTRANSFER => true,
        CURLOPT_HTTPHEADER => $headers,
        CURLOPT_USERAGENT => 'tollgate-polyglot-php',
        CURLOPT_CONNECTTIMEOUT => 5,
        CURLOPT_TIMEOUT => 90, // the gateway may hold a call for its turn
    ]);
    $body = curl_exec($ch);
    $status = $body === false ? 0 : curl_getinfo($ch, CURLINFO_RESPONSE_CODE);
    $error = $body === false ? curl_error($ch) : '';
    curl_close($ch);
    return [$status, $body === false ? null : json_decode($body, true), $error];
}

// record counts one answer; a call succeeded when it is a 200 with items.
function record(array &$report, string $what, array $answer): void {
    [$status, $data, $error] = $answer;
    $report['requests']++;
    $report['status']->$status = ($report['status']->$status ?? 0) + 1;
    if ($status === 200 && isset($data['items'])) {
        $report['ok']++;
        $report[$what]++;
    } elseif (count($report['errors']) < 5) {
        $report['errors'][] = "$what: $status $error";
    }
}

for ($pass = 0; $pass < $passes; $pass++) {
    foreach ($regions as $region) {
        // The token in the header where the key would go ...
        $q = http_build_query(['part' => 'snippet,statistics', 'chart' => 'mostPopular',
                               'regionCode' => $region, 'maxResults' => 10]);
        record($report, 'videos', get("$base/videos?$q", ["X-Goog-Api-Key: $token"]));
    }
    if ($pass % 3 === 0) {
        // ... or in the key parameter: the gateway takes either.
        $q = http_build_query(['part' => 'snippet', 'q' => 'trending', 'type' => 'video', 'key' => $token]);
        record($report, 'searches', get("$base/search?$q", []));
    }
}

echo json_encode($report), "\n";
