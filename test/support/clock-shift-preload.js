'use strict';
/**
 * Preloaded into a worker process (`NODE_OPTIONS=--require <this file>`): its WALL clock (`Date`)
 * is shifted by the milliseconds written in QL_TEST_CLOCK_SHIFT_FILE, read again on SIGUSR2 — an
 * NTP step as the process sees it. The monotonic clock (`performance.now()`) is untouched, as the
 * kernel leaves CLOCK_MONOTONIC untouched when the wall clock steps. Each step is acknowledged on
 * stderr (`clock shifted by <ms>`), so a test awaits it instead of sleeping.
 */
const { readFileSync } = require('node:fs');

const file = process.env.QL_TEST_CLOCK_SHIFT_FILE;
let shift = 0;
function read() {
  try {
    shift = Number(readFileSync(file, 'utf8').trim()) || 0;
  } catch {
    shift = 0;
  }
  process.stderr.write(`clock shifted by ${shift}\n`);
}
read();
process.on('SIGUSR2', read);

const RealDate = Date;
class ShiftedDate extends RealDate {
  constructor(...args) {
    if (args.length === 0) super(RealDate.now() + shift);
    else super(...args);
  }
  static now() {
    return RealDate.now() + shift;
  }
}
globalThis.Date = ShiftedDate;
