// The pg-boss instance drain.mjs and pressure.mjs drive: one pool of `connections` (else
// `consumers`) + 2 connections, no supervisor or scheduler of its own (a drain measures fetch and complete
// only), errors to stderr. Started before it is returned.
import { PgBoss } from 'pg-boss'

export async function startBoss (args) {
  const boss = new PgBoss({
    connectionString: args.dsn,
    schema: args.schema,
    max: (args.connections ?? args.consumers) + 2,
    supervise: false,
    schedule: false
  })
  boss.on('error', error => console.error(error))
  await boss.start()
  return boss
}
