// A Node service on OpenAI's official SDK (the `openai` npm package),
// sending chat completions through tollgate's gateway: the SDK's baseURL
// is the gateway's /openai/v1, and its apiKey is the caller's token. The
// gateway swaps in the real key and keeps the calls within the limits.
// One call in four is streamed; a stream counts as complete when it ends
// with a finish_reason and, after it, the usage chunk.
//
// Environment: GATEWAY (e.g. http://127.0.0.1:8787), TOLLGATE_TOKEN,
// CALLS, and NODE_PATH naming the node_modules that holds `openai`.
// Prints one JSON object: what it sent and what came back.

const OpenAI = require('openai');

const client = new OpenAI({
  baseURL: process.env.GATEWAY + '/openai/v1',
  apiKey: process.env.TOLLGATE_TOKEN,
  maxRetries: 0, // show every refusal instead of retrying it
  timeout: 90_000, // the gateway may hold a call for its turn
});
const calls = Number(process.env.CALLS);
const report = { requests: 0, ok: 0, streamed: 0, streamsCompleted: 0, status: {}, errors: [] };

function failed(i, err) {
  const status = err instanceof OpenAI.APIError ? String(err.status ?? 0) : '0';
  report.status[status] = (report.status[status] ?? 0) + 1;
  if (report.errors.length < 5) report.errors.push(`call ${i}: ${err.message}`);
}

async function call(i) {
  const params = {
    model: 'gpt-4o-mini',
    messages: [{ role: 'user', content: `Summarise today's trending videos, part ${i}.` }],
    max_tokens: 30,
  };
  report.requests++;
  try {
    if (i % 4 !== 3) {
      const r = await client.chat.completions.create(params);
      report.status['200'] = (report.status['200'] ?? 0) + 1;
      if (r.choices[0]?.finish_reason && r.usage?.total_tokens > 0) report.ok++;
      return;
    }
    report.streamed++;
    const stream = await client.chat.completions.create({
      ...params, stream: true, stream_options: { include_usage: true },
    });
    report.status['200'] = (report.status['200'] ?? 0) + 1;
    let finish = null, usage = null, text = '';
    for await (const chunk of stream) {
      const choice = chunk.choices[0];
      if (choice) {
        text += choice.delta?.content ?? '';
        finish = choice.finish_reason ?? finish;
      }
      if (chunk.usage) usage = chunk.usage;
    }
    if (finish && usage && text.length > 0) {
      report.ok++;
      report.streamsCompleted++;
    } else if (report.errors.length < 5) {
      report.errors.push(`call ${i}: stream ended early (finish ${finish}, usage ${JSON.stringify(usage)})`);
    }
  } catch (err) {
    failed(i, err);
  }
}

// Four calls at a time until CALLS are done.
async function main() {
  let next = 0;
  const lane = async () => {
    while (next < calls) await call(next++);
  };
  await Promise.all([lane(), lane(), lane(), lane()]);
  console.log(JSON.stringify(report));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
