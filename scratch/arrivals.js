// Scratch (not committed): how often do claims / completions arrive within a window of each other?
const { BenchSession, drain, noopTask } = require('../dist/bench/dispatch');
const { createBenchPki, createPlaneDatabase, startPlaneProcess } = require('../dist/bench/lib/plane');
const { Client } = require('pg');
(async () => {
  const n = Number(process.env.N || 16), runs = Number(process.env.RUNS || 300);
  const ids = Array.from({ length: n }, (_, i) => `arr-w${i + 1}`);
  const pki = await createBenchPki(ids);
  const db = await createPlaneDatabase('postgres', 'postgres://postgres@127.0.0.1:5432/postgres');
  const plane = await startPlaneProcess(db, pki, { QL_SESSION_LEASE_MS: '600000', QL_INGRESS_RATE_PER_SECOND: '100000', QL_INGRESS_RATE_BURST: '100000' });
  try {
    const sessions = [];
    for (const id of ids) sessions.push(await BenchSession.register(pki, plane, id));
    const { trigger } = await noopTask(plane, 'arr');
    for (let i = 0; i < runs; i++) await trigger();
    const d = await drain(sessions, runs);
    console.log('runs/s', d.runsPerSecond.toFixed(1));
    const c = new Client({ connectionString: db.url }); await c.connect();
    const types = (await c.query('SELECT DISTINCT type FROM run_events')).rows.map((r) => r.type);
    for (const type of types) {
      const at = (await c.query('SELECT extract(epoch from at)*1000 AS ms FROM run_events WHERE type=$1 ORDER BY at', [type])).rows.map((r) => Number(r.ms));
      for (const w of [2, 5]) {
        // greedy batches: a batch opens at an arrival and takes every arrival within w ms
        let batches = 0; for (let i = 0; i < at.length;) { const start = at[i]; batches++; while (i < at.length && at[i] - start <= w) i++; }
        console.log(type.padEnd(20), 'events', String(at.length).padStart(4), `window ${w} ms: mean batch`, (at.length / batches).toFixed(2));
      }
    }
    await c.end();
    for (const s of sessions) await s.close();
  } finally { await plane.stop(); await db.drop(); }
})().catch((e) => { console.error(e); process.exit(1); });
