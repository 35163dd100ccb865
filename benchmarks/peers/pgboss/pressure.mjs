// pg-boss side of `alkstore bench pressure`: a paced producer and fetch/complete loops.
//
// Usage: node pressure.mjs < args.json, with {dsn, schema, queue, rate, consumers, batch,
// seconds, poll, history}. The same loops the Python harness runs for alkstore
// (alkstore.bench.pressure.paced_loops): every 50 ms the producer inserts the jobs due at
// `rate` a second (boss.insert); `consumers` loops of boss.fetch(queue, {batchSize}) +
// boss.complete(queue, ids), sleeping `poll` seconds after an empty fetch, for `seconds`.
// Prints "ready" on a line of its own when its clock starts (the harness starts the hold's
// timeline then), and at the end one JSON object: sent and done ([seconds, count] pairs),
// fetches ([start, duration] pairs), duplicates.
import { startBoss } from './boss.mjs'
import { readFileSync } from 'node:fs'
import { performance } from 'node:perf_hooks'
import { setTimeout as sleep } from 'node:timers/promises'

const SEND_TICK = 50
const args = JSON.parse(readFileSync(0, 'utf8'))

const boss = await startBoss(args)
await boss.createQueue(args.queue)
// A queue with history (args.history jobs sent and completed), then the preparation every
// system gets (alkstore.bench.server.prepare_drain): VACUUM ANALYZE, CHECKPOINT.
for (let start = 0; start < args.history; start += 1000) {
  const size = Math.min(1000, args.history - start)
  await boss.insert(args.queue, Array.from({ length: size }, () => ({ data: { n: -1 } })))
  for (let jobs; (jobs = await boss.fetch(args.queue, { batchSize: 1000 })).length > 0;) {
    await boss.complete(args.queue, jobs.map(job => job.id))
  }
}
if (args.history > 0) {
  await boss.getDb().executeSql('VACUUM ANALYZE')
  try { await boss.getDb().executeSql('CHECKPOINT') } catch { /* needs superuser: skipped */ }
}

const sent = []
const done = []
const fetches = []
const seen = new Set()
let duplicates = 0
const began = performance.now()
const end = began + args.seconds * 1000
const since = () => (performance.now() - began) / 1000

async function produce () {
  let count = 0
  while (performance.now() < end) {
    const due = Math.floor(args.rate * since()) - count
    if (due > 0) {
      const jobs = Array.from({ length: due }, (_, i) => ({ data: { n: count + i } }))
      await boss.insert(args.queue, jobs)
      count += due
      sent.push([since(), due])
    }
    await sleep(SEND_TICK)
  }
}

async function consume () {
  while (performance.now() < end) {
    const start = since()
    const jobs = await boss.fetch(args.queue, { batchSize: args.batch })
    fetches.push([start, since() - start])
    if (jobs.length === 0) {
      await sleep(args.poll * 1000)
      continue
    }
    for (const job of jobs) {
      if (seen.has(job.id)) duplicates++
      seen.add(job.id)
    }
    await boss.complete(args.queue, jobs.map(job => job.id))
    done.push([since(), jobs.length])
  }
}

process.stdout.write('ready\n')
await Promise.all([produce(), ...Array.from({ length: args.consumers }, consume)])
await boss.stop({ graceful: true, wait: true })
process.stdout.write(JSON.stringify({ sent, done, fetches, duplicates }) + '\n')
