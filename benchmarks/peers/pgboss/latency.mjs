// pg-boss side of `alkstore bench latency`: send -> handler start through boss.work().
//
// Usage: node latency.mjs < args.json, with {dsn, schema, queue, rate, total, concurrency,
// timeoutSeconds}. The worker's instance listens (useListenNotify) on a queue created with
// notify: true; a second instance sends, one job every 1 / rate seconds, so the wake-up
// crosses the server as between processes. Each job carries performance.now() at the start
// of its send. Prints {waits, sends, commits} (seconds) as JSON on stdout: send start ->
// handler start, each send's duration, and send return (its commit) -> handler start.
import { PgBoss } from 'pg-boss'
import { readFileSync } from 'node:fs'
import { performance } from 'node:perf_hooks'
import { setTimeout as sleep } from 'node:timers/promises'

const args = JSON.parse(readFileSync(0, 'utf8'))
const common = { connectionString: args.dsn, schema: args.schema, supervise: false, schedule: false }
const boss = new PgBoss({ ...common, max: args.concurrency + 2, useListenNotify: true })
const sender = new PgBoss({ ...common, max: 2 })
for (const b of [boss, sender]) b.on('error', error => console.error(error))
await boss.start()
await boss.createQueue(args.queue, { notify: true })
await sender.start()

const handled = []
let resolveDone
const done = new Promise(resolve => { resolveDone = resolve })
await boss.work(args.queue, { batchSize: 1, localConcurrency: args.concurrency }, async jobs => {
  const now = performance.now()
  for (const job of jobs) handled.push([job.data.sent, now])
  if (handled.length >= args.total) resolveDone()
})

const sends = []
const returned = new Map()
const began = performance.now()
for (let n = 0; n < args.total; n++) {
  const delay = began + n * 1000 / args.rate - performance.now()
  if (delay > 0) await sleep(delay)
  const sent = performance.now()
  await sender.send(args.queue, { sent })
  const now = performance.now()
  sends.push((now - sent) / 1000)
  returned.set(sent, now)
}
await Promise.race([done, sleep(args.timeoutSeconds * 1000, false, { ref: false })])
await boss.stop({ graceful: true, wait: true })
await sender.stop({ graceful: true, wait: true })
const waits = handled.map(([sent, now]) => (now - sent) / 1000)
const commits = handled.filter(([sent]) => returned.has(sent))
  .map(([sent, now]) => (now - returned.get(sent)) / 1000)
process.stdout.write(JSON.stringify({ waits, sends, commits }))
