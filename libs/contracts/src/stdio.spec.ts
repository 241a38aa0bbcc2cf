import { Writable } from 'node:stream';
import { JsonLineLog } from '../../../apps/worker/src/logging/worker-log';
import { writeStdio } from './stdio';

const closed = (code: 'EIO' | 'EPIPE') =>
  Object.assign(new Error(`write ${code}`), { code, syscall: 'write' });

/** A stdout whose reader is gone: each write fails like a closed pipe (async) or terminal. */
function deadStream(code: 'EIO' | 'EPIPE') {
  const written: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      written.push(chunk.toString());
      done(closed(code));
    },
  });
  return { stream, written };
}

describe('writeStdio (the worker and control-plane log writer, ADR 0034)', () => {
  it.each(['EPIPE', 'EIO'] as const)(
    'a stream failing with %s: the log goes on without a crash, later lines are dropped',
    async (code) => {
      const { stream, written } = deadStream(code);
      const log = new JsonLineLog('info', (line) => writeStdio(stream, line));
      // After its 'error' event, with only writeStdio listening (events.once would listen to 'error').
      const gone = new Promise((done) => stream.on('close', done));
      log.info('worker stopping');
      await gone;
      expect(stream.errored).toMatchObject({ code });
      log.info('worker offline');
      log.error('worker stop failed');
      expect(written.map((l) => JSON.parse(l).msg)).toEqual(['worker stopping']);
    },
  );

  it('a write that throws (a synchronous EIO) is swallowed, and the stream is not written again', () => {
    let calls = 0;
    const stream = {
      on: () => stream,
      write: () => {
        calls += 1;
        throw closed('EIO');
      },
    } as unknown as NodeJS.WritableStream;
    expect(() => writeStdio(stream, 'a\n')).not.toThrow();
    expect(() => writeStdio(stream, 'b\n')).not.toThrow();
    expect(calls).toBe(1);
  });
});
