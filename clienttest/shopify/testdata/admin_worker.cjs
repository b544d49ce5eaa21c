// A Node service on Shopify's official @shopify/admin-api-client, sending
// an app's catalogue queries through `tollgate serve`: its customFetchApi
// sends what the client would send to the shop to the gateway instead.
// Environment: NODE_PATH (the installed package), GATEWAY (http://host:port
// of the gateway, whose /shopify/ upstream is the shop), TOKEN (the
// caller's token, given as the client's access token), WORKERS, START (ms
// since the epoch), DURATION (ms). It prints a JSON report.
'use strict';
const { createAdminApiClient } = require('@shopify/admin-api-client');
const { getCurrentSupportedApiVersions } = require('@shopify/graphql-client');

const shop = 'acme.myshopify.com';
const gateway = process.env.GATEWAY + '/shopify';
const client = createAdminApiClient({
  storeDomain: shop,
  apiVersion: getCurrentSupportedApiVersions()[0],
  accessToken: process.env.TOKEN,
  customFetchApi: (url, init) => fetch(String(url).replace('https://' + shop, gateway), init),
});

const query = `query Products($first: Int!) {
  products(first: $first) { edges { cursor node { id title handle } } pageInfo { hasNextPage } }
}`;

const report = { queries: 0, throttled: 0, refused: 0, failed: 0, firstErr: '' };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function work(end) {
  while (Date.now() < end) {
    let res;
    try {
      res = await client.request(query, { variables: { first: 50 } });
    } catch (e) {
      report.failed++;
      report.firstErr ||= String(e);
      continue;
    }
    const errors = res.errors;
    if (!errors) {
      report.queries++;
    } else if ((errors.graphQLErrors || []).some((g) => g.extensions && g.extensions.code === 'THROTTLED')) {
      report.throttled++;
      await sleep(1000); // as the client's own retries would
    } else if (errors.networkStatusCode === 429 || errors.networkStatusCode === 503) {
      report.refused++; // tollgate's refusal: no turn before the gateway's bound
      await sleep(500);
    } else {
      report.failed++;
      report.firstErr ||= JSON.stringify(errors);
    }
  }
}

(async () => {
  const start = Number(process.env.START);
  const end = start + Number(process.env.DURATION);
  await sleep(Math.max(0, start - Date.now()));
  await Promise.all(Array.from({ length: Number(process.env.WORKERS) }, () => work(end)));
  console.log(JSON.stringify(report));
})();
