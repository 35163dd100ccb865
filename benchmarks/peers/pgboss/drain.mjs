// pg-boss side of `alkstore bench peers`: pre-enqueue, warm up, then time a drain.
//
// Usage: node drain.mjs < args.json, with {dsn, schema, queue, jobs, consumers, batch, warmup,
// timeoutSeconds, analyze}. Jobs are inserted with boss.insert() in batches of 1,000; the drain runs
// `consumers` concurrent loops of boss.fetch(queue, {batchSize}) + boss.complete(queue, ids),
// the same loop the Python harness runs for alkstore; with mode 'work' it drains through
// boss.work() instead (batchSize = batch, localConcurrency = consumers, burstWhenBatchFull so
// a full batch fetches again at once: its best settings for a drain), the clock stopping when
// offWork has waited for the last completions. After the prefill: VACUUM ANALYZE (when
// analyze: the "steady" variant), CHECKPOINT (the preparation every system gets). Prints the
// lines "timed" and "drained" around the timed drain, then one JSON object on stdout:
// enqueueSeconds, seconds, ids (every id delivered), fetchSeconds (each fetch call),
// emptyFetches, peakRssBytes, versions. The harness counts completed jobs in the database.
import { startBoss } from './boss.mjs'
import { readFileSync } from 'node:fs'
import { performance } from 'node:perf_hooks'
import { setTimeout as sleep } from 'node:timers/promises'

const SEND_BATCH = 1000
const args = JSON.parse(readFileSync(0, 'utf8'))

async function enqueue (boss, queue, count) {
  const began = performance.now()
  for (let start = 0; start < count; start += SEND_BATCH) {
    const size = Math.min(SEND_BATCH, count - start)
    const jobs = Array.from({ length: size }, (_, i) => ({ data: { n: start + i } }))
    await boss.insert(queue, jobs)
  }
  return (performance.now() - began) / 1000
}

async function drain (boss, queue, target, consumers, batchSize, timeoutSeconds) {
  const tally = { claimed: 0 }
  const ids = []
  const fetchSeconds = []
  let emptyFetches = 0
  const deadline = performance.now() + timeoutSeconds * 1000
  let timedOut = false

  async function consume () {
    while (tally.claimed < target) {
      if (performance.now() > deadline) { timedOut = true; return }
      const began = performance.now()
      const jobs = await boss.fetch(queue, { batchSize })
      fetchSeconds.push((performance.now() - began) / 1000)
      if (jobs.length === 0) {
        if (tally.claimed < target) emptyFetches++
        await new Promise(resolve => setImmediate(resolve))
        continue
      }
      tally.claimed += jobs.length
      for (const job of jobs) ids.push(job.id)
      await boss.complete(queue, jobs.map(job => job.id))
    }
  }

  const began = performance.now()
  await Promise.all(Array.from({ length: consumers }, consume))
  return { seconds: (performance.now() - began) / 1000, ids, fetchSeconds, emptyFetches, timedOut }
}

async function drainWork (boss, queue, target, consumers, batchSize, timeoutSeconds) {
  const ids = []
  let resolveDone
  const done = new Promise(resolve => { resolveDone = () => resolve(true) })
  const began = performance.now()
  await boss.work(queue, { batchSize, localConcurrency: consumers, burstWhenBatchFull: true },
    async jobs => {
      for (const job of jobs) ids.push(job.id)
      if (ids.length >= target) resolveDone()
    })
  const finished = await Promise.race([done, sleep(timeoutSeconds * 1000, false, { ref: false })])
  await boss.offWork(queue, { wait: true })
  const seconds = (performance.now() - began) / 1000
  return { seconds, ids, fetchSeconds: [], emptyFetches: 0, timedOut: !finished }
}

const boss = await startBoss(args)
const warmupQueue = `${args.queue}_warmup`
await boss.createQueue(args.queue)
await boss.createQueue(warmupQueue)

const enqueueSeconds = await enqueue(boss, args.queue, args.jobs)
await enqueue(boss, warmupQueue, args.warmup)
const run = args.mode === 'work' ? drainWork : drain
await run(boss, warmupQueue, args.warmup, args.consumers, args.batch, args.timeoutSeconds)
// The same preparation as every system of the run (alkstore.bench.server.prepare_drain):
// "steady" (analyze true) vacuums and analyses, "burst" only checkpoints.
if (args.analyze) await boss.getDb().executeSql('VACUUM ANALYZE')
try { await boss.getDb().executeSql('CHECKPOINT') } catch { /* needs superuser: skipped */ }

// The harness reads the server's CPU time between these two lines (server CPU per job).
process.stdout.write('timed\n')
const result = await run(
  boss, args.queue, args.jobs, args.consumers, args.batch, args.timeoutSeconds)
process.stdout.write('drained\n')
await boss.stop({ graceful: true, wait: true })

const version = JSON.parse(
  readFileSync(new URL('./node_modules/pg-boss/package.json', import.meta.url))).version
process.stdout.write(JSON.stringify({
  enqueueSeconds,
  ...result,
  peakRssBytes: process.resourceUsage().maxRSS * 1024,
  versions: { node: process.version, 'pg-boss': version }
}))
