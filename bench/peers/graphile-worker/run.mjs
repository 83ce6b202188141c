// The graphile-worker peer for `make bench`: the same deliveries as
// Dakghar's burn-down (1 KB bodies, Standard Webhooks signatures, one
// receiver, one Postgres) as graphile-worker jobs, batching on.
//
//   node run.mjs --database-url URL --receiver-url URL [--events 5000]
//                [--endpoints 10] [--concurrency 64]
//
// graphile-worker and undici are loaded from $DAKGHAR_TOOLS/node_modules
// (default: the repository's .tools, where `make bench` installs both), so
// the repository needs no package.json or lockfile of its own for them.
// undici rather than node:http: on this bench it took half the CPU per
// request (about 50 µs against 100), and the peer should be at its best.
//
// stdout carries exactly two lines, for benches/dakghar/peer.rs: `START`
// just before the worker starts (the enqueue is not measured), then
// {"deliveries":N,"seconds":S,"per_sec":R,"peak_rss_bytes":B} as soon as
// the queue is empty (before shutdown and cleanup). Progress goes to stderr.

import crypto from "node:crypto";
import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const here = path.dirname(fileURLToPath(import.meta.url));
const tools = process.env.DAKGHAR_TOOLS || path.resolve(here, "../../../.tools");
const load = createRequire(`${tools}/`);
const { Logger, makeWorkerUtils, run } = load("graphile-worker");
const { Pool } = load("undici");

const { values: args } = parseArgs({
  options: {
    "database-url": {
      type: "string",
      default: process.env.BENCH_DATABASE_URL || process.env.TEST_DATABASE_URL,
    },
    "receiver-url": { type: "string" },
    events: { type: "string", default: "5000" },
    endpoints: { type: "string", default: "10" },
    // 64 in flight, as in B_http and Dakghar's burn-down (max_in_flight
    // 64); on 2 cores, 16, 32 and 128 were within noise of it.
    concurrency: { type: "string", default: "64" },
  },
});
const connectionString = args["database-url"];
if (!connectionString || !args["receiver-url"]) {
  console.error("usage: node run.mjs --database-url URL --receiver-url URL [--events N] [--endpoints N] [--concurrency N]");
  process.exit(2);
}
const receiver = new URL(args["receiver-url"]);
const events = Number(args.events);
const endpoints = Number(args.endpoints);
const concurrency = Number(args.concurrency);
const total = events * endpoints;
const log = (msg) => console.error(`  graphile-worker: ${msg}`);

// Per-job INFO lines ("Completed task …") would cost more than the job
// itself; a tuned deployment keeps warnings and errors only.
const logger = new Logger(() => (level, message) => {
  if (level === "error" || level === "warning") log(`${level}: ${message}`);
});

const schema = `graphile_bench_${crypto.randomBytes(6).toString("hex")}`;
const preset = {
  worker: {
    connectionString,
    schema,
    logger,
    concurrentJobs: concurrency,
    // graphile-worker's advice: concurrentJobs + 2 (it warns below that).
    maxPoolSize: concurrency + 2,
    // Jobs are all due now; polling only matters for retries.
    pollInterval: 100,
    // The batching the docs recommend for high throughput: one query locks
    // 500 jobs, and completions are committed together (250 ms, the docs'
    // suggested starting point).
    localQueue: { size: 500 },
    completeJobBatchDelay: 250,
    failJobBatchDelay: 250,
  },
};

// The body of Dakghar's bench events (benches/dakghar/seed.rs `payload`).
const body = (n) => Buffer.from(`{"n":${n},"data":"${"x".repeat(1000)}"}`);
// A signing key per endpoint: what Dakghar decodes from each `whsec_` secret.
const keys = Array.from({ length: endpoints }, () => crypto.randomBytes(24));
// Keep-alive connections, one per job in flight.
const pool = new Pool(receiver.origin, { connections: concurrency });
const hookPath = receiver.pathname + receiver.search;

let delivered = 0;
async function post(id, endpoint, payload) {
  const timestamp = Math.floor(Date.now() / 1000);
  const signature = crypto
    .createHmac("sha256", keys[endpoint])
    .update(`${id}.${timestamp}.`)
    .update(payload)
    .digest("base64");
  const res = await pool.request({
    path: hookPath,
    method: "POST",
    body: payload,
    headers: {
      "content-type": "application/json",
      "webhook-id": id,
      "webhook-timestamp": String(timestamp),
      "webhook-signature": `v1,${signature}`,
    },
  });
  await res.body.dump();
  // Thrown from the task, so graphile-worker retries the job.
  if (res.statusCode < 200 || res.statusCode >= 300) {
    throw new Error(`receiver answered ${res.statusCode}`);
  }
}

const taskList = {
  // One job per delivery: the event number and the endpoint's index; the
  // webhook-id is the event's id, as Dakghar sends it.
  deliver: async ({ n, endpoint }) => {
    await post(`bd_${String(n).padStart(7, "0")}`, endpoint, body(n));
    delivered++;
  },
};

// noHandleSignals leaves signals to us: a Ctrl-C still drops the schema.
let interrupted = null;
for (const signal of ["SIGINT", "SIGTERM"]) process.once(signal, () => (interrupted = signal));

const utils = await makeWorkerUtils({ preset });
let runner;
try {
  await utils.migrate();
  log(`schema ${schema}; queueing ${events} events × ${endpoints} endpoints`);
  // graphile-worker's own add_jobs (what addJobs calls), with the specs
  // built in Postgres so the enqueue leaves nothing in this process's
  // memory to inflate the peak RSS of the burn-down.
  await utils.withPgClient((c) =>
    c.query(
      `select count(*) from ${schema}.add_jobs(array(
         select row('deliver', json_build_object('n', d / $2, 'endpoint', d % $2),
                    null, null, null, null, null, null)::${schema}.job_spec
         from generate_series(0, $1 - 1) d))`,
      [total, endpoints],
    ),
  );
  const queued = await count();
  if (queued !== total) throw new Error(`queued ${queued} jobs, not ${total}`);

  process.stdout.write("START\n");
  const start = process.hrtime.bigint();
  runner = await run({
    preset,
    taskList,
    parsedCronItems: [],
    noHandleSignals: true,
  });
  const deadline = Date.now() + 3_600_000;
  // Every POST answered, then every completion committed: the queue is
  // empty. Counting in-process first keeps the polling off Postgres.
  while (delivered < total || (await count()) > 0) {
    if (Date.now() > deadline) throw new Error(`stalled at ${delivered} of ${total}`);
    if (interrupted) throw new Error(`${interrupted} at ${delivered} of ${total}`);
    await new Promise((r) => setTimeout(r, delivered < total ? 20 : 5));
  }
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  const result = {
    deliveries: total,
    seconds,
    per_sec: total / seconds,
    peak_rss_bytes: peakRss(),
  };
  process.stdout.write(`${JSON.stringify(result)}\n`);
  log(`${total} in ${seconds.toFixed(2)} s, ${result.per_sec.toFixed(0)}/s`);
} finally {
  await runner?.stop();
  await utils.withPgClient((c) => c.query(`drop schema if exists ${schema} cascade`));
  await utils.release();
  await pool.close();
}

async function count() {
  const { rows } = await utils.withPgClient((c) =>
    c.query(`select count(*)::int as n from ${schema}._private_jobs`),
  );
  return rows[0].n;
}

// VmHWM, the peak resident set, as the bench reads Dakghar's.
function peakRss() {
  const status = fs.readFileSync("/proc/self/status", "utf8");
  return Number(/^VmHWM:\s+(\d+) kB/m.exec(status)[1]) * 1024;
}
