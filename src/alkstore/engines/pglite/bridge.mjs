#!/usr/bin/env node
// alkstore PGlite bridge.
//
// Runs PGlite (PostgreSQL compiled to WASM) inside this Node.js process and
// serves it over the PostgreSQL wire protocol with @electric-sql/pglite-socket.
// Started and owned by alkstore.engines.pglite.bridge (Python).
//
// Usage:
//   node bridge.mjs [--data-dir DIR] [--host 127.0.0.1] [--port 0]
//                   [--max-connections 1] [--queue-timeout 30] [--no-stdin-watch]
//                   [--load-data-dir FILE]
//
// --data-dir omitted: in-memory database. --port 0: the OS picks the port.
// --load-data-dir: a tarball made by a dump request (below); a fresh database
// (in memory, or a data directory without PG_VERSION) starts as a copy of it
// instead of running initdb, which is most of a fresh start's time.
//
// Protocol with the parent:
//   * stdout carries one JSON line first, then only answers to requests:
//       {"ready":true,"port":54321,"host":"127.0.0.1","pid":123,
//        "pglite":"0.5.14","pglite_socket":"0.2.17","postgres":"18.6",
//        "data_dir":"/abs/dir" | null,"max_connections":1,"startup_ms":812}
//     or, on failure before readiness,
//       {"ready":false,"error":"..."}   followed by a non-zero exit.
//   * All diagnostics go to stderr.
//   * After the ready line, each line written to stdin that is a JSON object
//     {"dump": "/abs/file.tar"} is a request to CHECKPOINT and write the whole
//     database as a tarball (to a temporary file renamed into place, so readers
//     never see a partial one); the bridge answers with one JSON line
//     {"dumped": "/abs/file.tar", "bytes": N} or {"dumped": null, "error": "..."}.
//     The parent sends it only while no client has a transaction open.
//   * When stdin reaches EOF (the parent closed it, or the parent died and the
//     kernel closed the pipe) the bridge stops the server, closes PGlite so a
//     persistent data directory is left consistent, and exits 0.
//     SIGTERM, SIGINT and SIGHUP do the same. --no-stdin-watch is for running
//     it by hand.
//
// On top of pglite-socket (see the comments at each piece):
//   * at most --max-connections clients are served; more wait in a queue and
//     get FATAL 53300 after --queue-timeout seconds (pglite-socket alone
//     refuses them by dropping the socket, and does so now and then even for a
//     client that reconnects right after closing);
//   * SSLRequest and GSSENCRequest are declined with 'N', CancelRequest
//     connections are closed at once (PGlite cannot cancel), non-3.x startup
//     packets get an error;
//   * a client's Terminate message closes its socket (asyncpg waits for that);
//   * the messages a client has sent run in one pass of PGlite, with one write
//     of the replies (pglite-socket runs and answers them one by one);
//   * prepared statements are deallocated once the last client has gone;
//   * if PGlite fails while executing a message the bridge exits with status 1
//     (pglite-socket's query queue would otherwise stall forever);
//   * a watchdog thread kills the bridge if its parent died and the main
//     thread (stuck in PGlite) has not exited within 25 s (environment
//     variable ALKSTORE_PGLITE_WATCHDOG_GRACE_MS overrides, for tests).

import { existsSync, readFileSync, renameSync, unlinkSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import v8 from 'node:v8'
import vm from 'node:vm'
import { Worker } from 'node:worker_threads'

const SHUTDOWN_STEP_MS = 8000
const SHUTDOWN_HARD_MS = 20000
// Sockets beyond the active limit wait in a queue; beyond this many, Node drops them.
const MAX_QUEUED_CONNECTIONS = 64
const SSL_REQUEST_CODE = 80877103
const GSSENC_REQUEST_CODE = 80877104
const CANCEL_REQUEST_CODE = 80877102
const TERMINATE = 0x58 // 'X'
const MAX_STARTUP_LENGTH = 10000 // PostgreSQL's own limit on a startup packet
const PREAMBLE_TIMEOUT_MS = 60000 // a client that connects but never starts up
const WATCHDOG_INTERVAL_MS = 500
// initdb writes shared_buffers = 128MB into postgresql.conf. PGlite's mmap
// zero-fills the shared memory with memset in WASM at every start: with 128MB
// that was about 110 ms of a reopened data directory's start (a CPU profile of
// the bridge), with 32MB about a quarter of it. The demo drain used no more
// bridge CPU per job at 32MB than at 128MB (16MB: 5 % more). Given on the
// command line, so a data directory's own postgresql.conf is left alone.
const SHARED_BUFFERS = '32MB'
const WATCHDOG_GRACE_MS =
  Number(process.env.ALKSTORE_PGLITE_WATCHDOG_GRACE_MS) > 0
    ? Number(process.env.ALKSTORE_PGLITE_WATCHDOG_GRACE_MS)
    : SHUTDOWN_HARD_MS + 5000

let readyPrinted = false
let failed = false
let db = null
let server = null
let gate = null
let startup = null
let shuttingDown = null

// When the parent dies its ends of our stdout/stderr pipes close; writes then
// fail with EPIPE, reported as asynchronous 'error' events. Unhandled, each
// would be an uncaught exception whose logging fails again: a busy loop that
// keeps the bridge alive. So: note it once and stop writing to that stream.
let stdoutOpen = true
let stderrOpen = true
process.stdout.on('error', () => {
  stdoutOpen = false
})
process.stderr.on('error', () => {
  stderrOpen = false
})

function log(...parts) {
  if (!stderrOpen) return
  try {
    process.stderr.write(`[alkstore-pglite-bridge ${process.pid}] ${parts.join(' ')}\n`)
  } catch {
    stderrOpen = false
  }
}

function emitLine(obj) {
  // One JSON line on stdout; the parent reads exactly one.
  if (!stdoutOpen) return
  process.stdout.write(JSON.stringify(obj) + '\n')
}

function fail(message, code = 1) {
  if (failed) return
  failed = true
  if (!readyPrinted) {
    try {
      emitLine({ ready: false, error: message })
    } catch {
      // stdout gone
    }
  }
  log('error:', message)
  process.exitCode = code
  // A shutdown in progress exits by itself; otherwise exit once stdout drained.
  if (!shuttingDown) setTimeout(() => process.exit(code), 50).unref()
}

function errorText(err) {
  if (err instanceof Error) return err.message || String(err)
  return String(err)
}

function parseArgs(argv) {
  const opts = {
    dataDir: null,
    host: '127.0.0.1',
    port: 0,
    maxConnections: 1,
    queueTimeoutMs: 30000,
    stdinWatch: true,
    loadDataDir: null,
  }
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]
    const eq = arg.indexOf('=')
    const name = eq >= 0 ? arg.slice(0, eq) : arg
    const takeValue = () => {
      if (eq >= 0) return arg.slice(eq + 1)
      if (i + 1 >= argv.length) throw new Error(`option ${name} needs a value`)
      return argv[++i]
    }
    switch (name) {
      case '--data-dir': {
        const v = takeValue()
        opts.dataDir = v === '' ? null : v
        break
      }
      case '--host':
        opts.host = takeValue()
        break
      case '--port': {
        const v = Number(takeValue())
        if (!Number.isInteger(v) || v < 0 || v > 65535) throw new Error(`bad --port: ${v}`)
        opts.port = v
        break
      }
      case '--max-connections': {
        const v = Number(takeValue())
        if (!Number.isInteger(v) || v < 1) throw new Error(`bad --max-connections: ${v}`)
        opts.maxConnections = v
        break
      }
      case '--queue-timeout': {
        const v = Number(takeValue())
        if (!Number.isFinite(v) || v < 0) throw new Error(`bad --queue-timeout: ${v}`)
        opts.queueTimeoutMs = Math.round(v * 1000)
        break
      }
      case '--load-data-dir':
        opts.loadDataDir = takeValue()
        break
      case '--no-stdin-watch':
        opts.stdinWatch = false
        break
      default:
        throw new Error(`unknown argument: ${arg}`)
    }
  }
  return opts
}

function packageVersion(specifier) {
  // The packages' "exports" maps do not expose package.json, so locate it from
  // the resolved entry point (…/node_modules/<pkg>/dist/index.js).
  try {
    let dir = path.dirname(fileURLToPath(import.meta.resolve(specifier)))
    for (let i = 0; i < 4; i++) {
      try {
        const pkg = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8'))
        if (pkg.name === specifier) return pkg.version
      } catch {
        // keep walking up
      }
      dir = path.dirname(dir)
    }
  } catch {
    // fall through
  }
  return null
}

function withTimeout(promise, ms, what) {
  let timer
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms)
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}

let opts
try {
  opts = parseArgs(process.argv.slice(2))
} catch (err) {
  fail(errorText(err), 2)
}

async function shutdown(reason, code = 0) {
  if (shuttingDown) return shuttingDown
  log(`shutting down (${reason})`)
  // Never hang: whatever happens, exit after SHUTDOWN_HARD_MS.
  setTimeout(() => {
    log('shutdown took too long, exiting')
    process.exit(code || 1)
  }, SHUTDOWN_HARD_MS).unref()
  shuttingDown = (async () => {
    let exitCode = code
    if (startup) {
      // Let an in-flight initdb finish so a data directory is not left half made.
      try {
        await withTimeout(startup.catch(() => {}), SHUTDOWN_STEP_MS, 'startup')
      } catch (err) {
        log(errorText(err))
      }
    }
    if (!readyPrinted && !failed) {
      failed = true
      try {
        emitLine({ ready: false, error: `stopped before ready (${reason})` })
      } catch {
        // stdout gone
      }
      exitCode = exitCode || 1
    }
    if (server) {
      try {
        const stopped = server.stop()
        // Clients still connected: close them, do not wait for them.
        if (gate) setImmediate(() => gate.destroyAll())
        await withTimeout(stopped, SHUTDOWN_STEP_MS, 'socket server stop')
      } catch (err) {
        log('server stop failed:', errorText(err))
        exitCode = exitCode || 1
      }
    }
    if (db && !db.closed) {
      try {
        await withTimeout(db.close(), SHUTDOWN_STEP_MS, 'PGlite close')
      } catch (err) {
        log('PGlite close failed:', errorText(err))
        exitCode = exitCode || 1
      }
    }
    log('bye')
    process.exit(failed ? exitCode || 1 : exitCode)
  })()
  return shuttingDown
}

for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP']) {
  process.on(sig, () => void shutdown(sig))
}

process.on('uncaughtException', (err) => {
  log('uncaught exception:', err && err.stack ? err.stack : errorText(err))
  if (!readyPrinted) {
    fail(errorText(err), 1)
  } else {
    void shutdown('uncaught exception', 1)
  }
})

process.on('unhandledRejection', (err) => {
  // pglite-socket detaches handlers without awaiting; keep serving but record it.
  log('unhandled rejection:', err && err.stack ? err.stack : errorText(err))
  if (!readyPrinted) fail(errorText(err), 1)
})

function errorResponse(sqlstate, message) {
  // PostgreSQL ErrorResponse ('E'), severity FATAL.
  const fields = [
    ['S', 'FATAL'],
    ['V', 'FATAL'],
    ['C', sqlstate],
    ['M', message],
  ]
  const body = Buffer.concat([
    ...fields.map(([k, v]) => Buffer.concat([Buffer.from(k), Buffer.from(v, 'utf8'), Buffer.alloc(1)])),
    Buffer.alloc(1),
  ])
  const head = Buffer.alloc(5)
  head.write('E', 0)
  head.writeInt32BE(body.length + 4, 1)
  return Buffer.concat([head, body])
}

// pglite-socket hands a client's Terminate ('X') message to PGlite, which
// ignores it, and keeps the socket open. Real PostgreSQL closes the
// connection; asyncpg's close() waits for exactly that and would hang.
// This listener frames the client's messages (it only reads: the
// pglite-socket handler still gets every byte) and ends the socket on 'X'.
// The stream starts with the StartupMessage (preamble() consumed the rest).
function closeOnTerminate(socket) {
  let buf = Buffer.alloc(0)
  let started = false
  const onData = (chunk) => {
    buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk])
    for (;;) {
      if (!started) {
        if (buf.length < 4) return
        const len = buf.readInt32BE(0)
        if (buf.length < len) return
        buf = buf.subarray(len)
        started = true
        continue
      }
      if (buf.length < 5) return
      const len = buf.readInt32BE(1)
      if (len < 4) {
        socket.removeListener('data', onData) // framing lost; leave it to pglite-socket
        return
      }
      if (buf.length < 1 + len) return
      const type = buf[0]
      buf = buf.subarray(1 + len)
      if (type === TERMINATE) {
        socket.removeListener('data', onData)
        // Let pglite-socket finish what came before; then close like a backend exits.
        setImmediate(() => socket.end())
        return
      }
    }
  }
  socket.on('data', onData)
}

// Stdin EOF is handled on the main thread. PGlite runs SQL synchronously on
// that thread, and some failures never return (a FATAL error, e.g. after a
// malformed protocol message, leaves PGlite spinning in WASM): then neither
// EOF nor signals are ever processed, and an orphaned bridge would burn CPU
// forever. This worker thread checks the parent pid on its own event loop;
// once the parent is gone and the main thread has not exited within
// WATCHDOG_GRACE_MS, it SIGKILLs the process.
function startParentWatchdog() {
  const source = `
    const { workerData } = require('node:worker_threads')
    const fs = require('node:fs')
    let goneSince = 0
    setInterval(() => {
      if (process.ppid === workerData.ppid) return
      const now = Date.now()
      if (!goneSince) goneSince = now
      if (now - goneSince < workerData.graceMs) return
      try {
        fs.writeSync(2, '[alkstore-pglite-bridge ' + process.pid + '] parent gone and main thread ' +
          'stuck for ' + workerData.graceMs + ' ms: killing the bridge\\n')
      } catch {}
      process.kill(process.pid, 'SIGKILL')
    }, workerData.intervalMs)
  `
  try {
    const worker = new Worker(source, {
      eval: true,
      workerData: { ppid: process.ppid, graceMs: WATCHDOG_GRACE_MS, intervalMs: WATCHDOG_INTERVAL_MS },
      stdout: true, // never write to our real stdout
      resourceLimits: { maxOldGenerationSizeMb: 16 },
    })
    worker.unref()
    worker.on('error', (err) => log('watchdog failed:', errorText(err)))
  } catch (err) {
    log('watchdog unavailable:', errorText(err))
  }
}

// pglite-socket runs every client message through db.execProtocolRawStream.
// If that throws (PGlite itself failed, e.g. a WASM trap), pglite-socket's
// queue keeps its "processing" flag set and every later query waits forever.
// Exit instead, so the parent sees a dead bridge rather than a hung one.
function exitOnPGliteFailure(pglite) {
  const raw = pglite.execProtocolRawStream
  if (typeof raw !== 'function') return
  pglite.execProtocolRawStream = async function guardedExecProtocolRawStream(...args) {
    try {
      return await raw.apply(this, args)
    } catch (err) {
      if (!shuttingDown) {
        log('PGlite failed executing a client message:', err && err.stack ? err.stack : errorText(err))
        void shutdown('PGlite failure', 1)
      }
      throw err
    }
  }
}

// pglite-socket runs each protocol message of a client through PGlite on its
// own (a queue entry, the exclusive lock, one pass of PGlite's main loop) and
// writes each piece of output to the socket as PGlite produces it: a statement
// sent the extended way (Parse, Bind, Describe, Execute, Sync) cost five passes
// and five or more socket writes, each a TCP segment (pglite-socket sets
// TCP_NODELAY). Measured on the demo drain, the socket writes alone were a fifth
// of the bridge's CPU. This replaces the handler's message loop: every complete
// message that has arrived goes to PGlite in one pass (its main loop reads them
// in turn, like a backend reads a pipeline), whose output PGlite flushes once,
// at its end: one write. The startup message and Terminate still go on their
// own: PGlite recognises them by the first byte of what it is given.
// Returns whether pglite-socket's handler had the expected shape.
function batchClientMessages(Handler) {
  const proto = Handler && Handler.prototype
  if (!proto || typeof proto.handleData !== 'function') return false
  proto.handleData = async function batchedHandleData(data) {
    if (!this.socket || !this.active) return 0
    this.messageBuffer = this.messageBuffer.length === 0 ? data : Buffer.concat([this.messageBuffer, data])
    // One loop per client drains the buffer (what arrives meanwhile joins the
    // next pass), so its replies are written in the order of its messages.
    if (this.alkstoreDraining) return 0
    this.alkstoreDraining = true
    try {
      return await drainMessages(this)
    } finally {
      this.alkstoreDraining = false
    }
  }
  return true
}

async function drainMessages(h) {
  let outgoing = 0
  for (;;) {
    const size = nextBatchSize(h.messageBuffer, h.alkstoreStarted === true)
    if (size === 0 || !h.active || !h.socket) break
    const batch = h.messageBuffer.subarray(0, size)
    h.messageBuffer = h.messageBuffer.subarray(size)
    h.alkstoreStarted = true
    await h.queryQueue.enqueue(h.id, new Uint8Array(batch), (out) => {
      // Written at once (a copy: `out` is a view into PGlite's memory): a FATAL
      // error reaches the client even if PGlite then never returns.
      if (out.length === 0 || !h.socket || !h.socket.writable || !h.active) return
      outgoing += out.length
      h.socket.write(Buffer.from(out))
    })
  }
  return outgoing
}

// The bytes at the head of `buf` that form the next pass for PGlite: the
// startup message alone (`started` false), else every complete message before
// the first incomplete one, with a Terminate ('X') alone. 0: nothing complete.
function nextBatchSize(buf, started) {
  if (!started) {
    if (buf.length < 8) return 0
    const len = buf.readInt32BE(0)
    return buf.length >= len ? len : 0
  }
  let size = 0
  while (buf.length - size >= 5) {
    const type = buf[size]
    const len = 1 + buf.readInt32BE(size + 1)
    if (len < 5 || buf.length - size < len) break
    if (type === TERMINATE) return size === 0 ? len : size
    size += len
  }
  return size
}

// Initialising a fresh database leaves a few hundred MB behind (initdb's WASM
// memory, buffers) that V8 has no reason to collect soon: measured RSS of a
// fresh in-memory bridge drops from ~750 MB to ~450 MB after this. Two full
// collections a tick apart are needed (the first one only unlinks).
async function collectGarbage() {
  try {
    let gc = globalThis.gc
    if (typeof gc !== 'function') {
      v8.setFlagsFromString('--expose-gc')
      gc = vm.runInNewContext('gc')
      v8.setFlagsFromString('--no-expose-gc')
    }
    if (typeof gc !== 'function') return
    for (let i = 0; i < 2; i++) {
      await new Promise((resolve) => setTimeout(resolve, 0))
      gc()
    }
  } catch (err) {
    log('gc unavailable:', errorText(err))
  }
}

// PGlite is a single backend session. pglite-socket (0.2.x) refuses a client
// beyond `maxConnections` by closing it at once, and it frees a slot only a
// tick after the previous client's socket closed, so a client that disconnects
// and immediately reconnects is refused now and then. This gate makes extra
// clients wait (paused, their bytes buffered by Node) until a slot is free,
// and answers a proper FATAL 53300 if none frees up within the queue timeout.
function installConnectionGate(srv, limit, queueTimeoutMs) {
  if (typeof srv.handleConnection !== 'function') return null
  const original = srv.handleConnection.bind(srv)
  const sockets = new Set()
  const waiting = []
  let active = 0

  const admit = (socket) => {
    active++
    let released = false
    original(socket)
    // pglite-socket attached its listeners synchronously inside original().
    closeOnTerminate(socket)
    // preamble() paused the socket explicitly, and a new 'data' listener does
    // not resume an explicitly paused stream: resume it now.
    socket.resume()
    // Registered after pglite-socket's own 'close' listener so that its
    // handler bookkeeping (also deferred with setImmediate) runs first.
    socket.once('close', () => {
      if (released) return
      released = true
      setImmediate(async () => {
        if (active === 1) await forgetPreparedStatements()
        active--
        admitWaiting()
      })
    })
  }

  const admitWaiting = () => {
    while (active < limit && waiting.length > 0) {
      const entry = waiting.shift()
      clearTimeout(entry.timer)
      if (entry.socket.destroyed) continue
      admit(entry.socket)
    }
  }

  const refuse = (socket) => {
    socket.end(
      errorResponse(
        '53300',
        `sorry, too many clients already: this PGlite bridge serves ${limit} ` +
          `connection(s) at a time and none became free within ${queueTimeoutMs} ms`,
      ),
    )
    setTimeout(() => socket.destroy(), 1000).unref()
  }

  const admitOrQueue = (socket) => {
    if (shuttingDown) {
      socket.destroy()
      return
    }
    if (active < limit && waiting.length === 0) {
      admit(socket)
      return
    }
    const entry = { socket }
    entry.timer = setTimeout(() => {
      const i = waiting.indexOf(entry)
      if (i >= 0) waiting.splice(i, 1)
      log(`refusing a connection that waited ${queueTimeoutMs} ms for a free slot`)
      refuse(socket)
    }, queueTimeoutMs)
    waiting.push(entry)
  }

  srv.handleConnection = (socket) => {
    if (shuttingDown) {
      socket.destroy()
      return
    }
    sockets.add(socket)
    socket.once('close', () => sockets.delete(socket))
    // Before pglite-socket attaches its own listener, a reset from the client
    // must not become an uncaught exception.
    socket.on('error', () => socket.destroy())
    preamble(socket, () => admitOrQueue(socket))
  }

  return {
    // Forcibly close every client socket (used on shutdown so that the
    // server's close() does not wait for idle or queued clients).
    destroyAll() {
      for (const entry of waiting.splice(0)) clearTimeout(entry.timer)
      for (const socket of sockets) socket.destroy()
    },
  }
}

// A backend's prepared statements end with its connection; PGlite's outlive
// the client that prepared them, in the one session every client shares. Once
// the last active client has gone (pglite-socket has rolled back what it left
// open: its listener ran first), they are deallocated before the next client is
// admitted, so that a client naming its statements from scratch (psycopg's
// _pg3_0, ...) never meets those of the one before. Clients served at the same
// time still share them: alkstore prepares only on a bridge it started for
// itself alone.
async function forgetPreparedStatements() {
  if (shuttingDown || !db || db.closed) return
  try {
    await db.exec('DEALLOCATE ALL')
  } catch (err) {
    log('could not deallocate the prepared statements of a closed client:', errorText(err))
  }
}

// Read a new client's connection preamble before it is admitted or queued:
// answer SSLRequest and GSSENCRequest with 'N' (no encryption; pglite-socket
// 0.2 does not understand GSSENCRequest at all), close a CancelRequest's
// connection (PGlite cannot cancel a running query; PostgreSQL closes these
// connections too, and a queued cancel would otherwise wait for a free slot),
// refuse anything that is not protocol 3.x, and hand the StartupMessage back
// to the stream for pglite-socket with the socket paused.
function preamble(socket, onStartup) {
  let buf = Buffer.alloc(0)
  const timer = setTimeout(() => socket.destroy(), PREAMBLE_TIMEOUT_MS)
  socket.once('close', () => clearTimeout(timer))
  const stop = () => {
    clearTimeout(timer)
    socket.pause()
    socket.removeListener('data', onData)
  }
  const onData = (chunk) => {
    buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk])
    while (buf.length >= 8) {
      const len = buf.readInt32BE(0)
      const code = buf.readInt32BE(4)
      if (len === 8 && (code === SSL_REQUEST_CODE || code === GSSENC_REQUEST_CODE)) {
        socket.write('N')
        buf = buf.subarray(8)
        continue
      }
      if (len === 16 && code === CANCEL_REQUEST_CODE) {
        stop()
        socket.end()
        return
      }
      if (len < 8 || len > MAX_STARTUP_LENGTH || code >>> 16 !== 3) {
        stop()
        socket.end(errorResponse('08P01', `unsupported frontend protocol or invalid startup packet`))
        setTimeout(() => socket.destroy(), 1000).unref()
        return
      }
      if (buf.length < len) return
      stop()
      socket.unshift(buf)
      onStartup()
      return
    }
  }
  socket.on('data', onData)
}

// Requests on stdin, one JSON object a line (see the header); anything else is
// ignored. Requests run one at a time, in order.
function watchRequests(stdin) {
  let pending = ''
  let chain = Promise.resolve()
  stdin.on('data', (chunk) => {
    pending += chunk.toString('utf8')
    let nl
    while ((nl = pending.indexOf('\n')) >= 0) {
      const line = pending.slice(0, nl)
      pending = pending.slice(nl + 1)
      let request
      try {
        request = JSON.parse(line)
      } catch {
        continue
      }
      if (request && typeof request.dump === 'string') {
        const target = request.dump
        chain = chain.then(() => dumpTo(target))
      }
    }
  })
}

async function dumpTo(target) {
  if (!readyPrinted || shuttingDown || !db || db.closed) {
    emitLine({ dumped: null, error: 'the bridge is not serving' })
    return
  }
  const tmp = `${target}.tmp-${process.pid}`
  try {
    // Dirty pages live in shared buffers, not in the files a dump reads.
    await db.exec('CHECKPOINT')
    const blob = await db.dumpDataDir('none')
    const bytes = Buffer.from(await blob.arrayBuffer())
    writeFileSync(tmp, bytes)
    renameSync(tmp, target)
    emitLine({ dumped: target, bytes: bytes.length })
  } catch (err) {
    try {
      unlinkSync(tmp)
    } catch {
      // never written
    }
    log('dump failed:', errorText(err))
    emitLine({ dumped: null, error: errorText(err) })
  }
}

// The options for PGlite.create: a fresh database starts as a copy of
// --load-data-dir when given (PGlite refuses to load over an existing one), and
// every start sets shared_buffers (see SHARED_BUFFERS).
function createOptions(PGlite, dataDir, fresh) {
  const options = dataDir === null ? {} : { dataDir }
  options.startParams = [...PGlite.defaultStartParams, '-c', `shared_buffers=${SHARED_BUFFERS}`]
  if (opts.loadDataDir !== null && fresh) {
    options.loadDataDir = new Blob([readFileSync(opts.loadDataDir)])
  }
  return options
}

async function main() {
  const t0 = Date.now()
  if (opts.stdinWatch) {
    // EOF on stdin == parent is gone or asked us to stop.
    process.stdin.on('end', () => void shutdown('stdin closed'))
    process.stdin.on('close', () => void shutdown('stdin closed'))
    process.stdin.on('error', () => void shutdown('stdin error'))
    watchRequests(process.stdin)
    process.stdin.resume()
    startParentWatchdog()
  }

  const { PGlite } = await import('@electric-sql/pglite')
  const { PGLiteSocketServer, PGLiteSocketHandler } = await import('@electric-sql/pglite-socket')

  let dataDir = null
  if (opts.dataDir !== null) {
    dataDir = path.resolve(opts.dataDir)
  }
  // A plain path selects PGlite's NodeFS (a real directory on disk);
  // no argument selects the in-memory filesystem.
  // A fresh database is made now: by initdb, or from the --load-data-dir tarball.
  const fresh = dataDir === null || !existsSync(path.join(dataDir, 'PG_VERSION'))
  const createWith = createOptions(PGlite, dataDir, fresh)
  const loaded = createWith.loadDataDir !== undefined
  db = await PGlite.create(createWith)
  if (shuttingDown) return
  exitOnPGliteFailure(db)

  const versionRes = await db.query("SELECT current_setting('server_version') AS v")
  const postgresVersion = versionRes.rows[0]?.v ?? null

  server = new PGLiteSocketServer({
    db,
    host: opts.host,
    port: opts.port,
    // The gate below enforces opts.maxConnections; this is the hard cap on
    // accepted sockets including queued ones (it is also Node's server cap).
    maxConnections: opts.maxConnections + MAX_QUEUED_CONNECTIONS,
  })
  gate = installConnectionGate(server, opts.maxConnections, opts.queueTimeoutMs)
  // The batching relies on preamble() (in the gate) having consumed SSL and
  // GSSENC requests: the first message a handler sees is the startup message.
  if (gate !== null && !batchClientMessages(PGLiteSocketHandler)) {
    log('message batching unavailable; each client message runs on its own')
  }
  if (gate === null) {
    // Unknown pglite-socket internals: fall back to its own (racy) limit.
    log('connection gate unavailable; extra connections are refused immediately')
    server = new PGLiteSocketServer({
      db,
      host: opts.host,
      port: opts.port,
      maxConnections: opts.maxConnections,
    })
  }
  let boundPort = null
  server.addEventListener('listening', (ev) => {
    if (ev.detail && typeof ev.detail.port === 'number') boundPort = ev.detail.port
  })
  server.addEventListener('error', (ev) => {
    log('socket server error:', errorText(ev.detail))
  })
  await server.start()
  if (boundPort === null) {
    // Fallback: "host:port" string.
    const conn = server.getServerConn()
    const m = /:(\d+)$/.exec(conn)
    if (m) boundPort = Number(m[1])
  }
  if (!boundPort) throw new Error(`could not determine the bound port (${server.getServerConn()})`)
  if (shuttingDown) return

  if (fresh) {
    // Only making a database leaves garbage worth collecting before serving; on
    // a reopened data directory the collection freed nothing measurable (RSS
    // ~190 MB before and after) and cost two event-loop turns plus the GC.
    await collectGarbage()
    if (shuttingDown) return
  }
  readyPrinted = true
  emitLine({
    ready: true,
    port: boundPort,
    host: opts.host,
    pid: process.pid,
    pglite: packageVersion('@electric-sql/pglite'),
    pglite_socket: packageVersion('@electric-sql/pglite-socket'),
    postgres: postgresVersion,
    data_dir: dataDir,
    max_connections: opts.maxConnections,
    startup_ms: Date.now() - t0,
    loaded_data_dir: loaded,
  })
  log(`ready on ${opts.host}:${boundPort} (data dir: ${dataDir ?? 'memory'})`)
}

if (opts && !failed) {
  startup = main()
  startup.catch((err) => {
    fail(errorText(err), 1)
    // Best effort: release PGlite if it was created.
    if (!shuttingDown && db && !db.closed) db.close().catch(() => {})
  })
}
