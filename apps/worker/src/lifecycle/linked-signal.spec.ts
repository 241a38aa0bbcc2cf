import { getEventListeners } from 'node:events';
import { linkedSignal } from './linked-signal';

describe('linkedSignal (ADR 0049)', () => {
  it.each(['a', 'b'] as const)(
    'aborts when %s aborts, with its reason, and leaves no listener on either',
    (which) => {
      const a = new AbortController();
      const b = new AbortController();
      const link = linkedSignal(a.signal, b.signal);
      expect(link.signal.aborted).toBe(false);
      const reason = new Error(`stop ${which}`);
      (which === 'a' ? a : b).abort(reason);
      expect(link.signal.aborted).toBe(true);
      expect(link.signal.reason).toBe(reason);
      expect(getEventListeners(a.signal, 'abort')).toHaveLength(0);
      expect(getEventListeners(b.signal, 'abort')).toHaveLength(0);
    },
  );

  it('is aborted at once when a source already is, with that reason', () => {
    const a = new AbortController();
    const b = new AbortController();
    b.abort('gone');
    const link = linkedSignal(a.signal, b.signal);
    expect(link.signal.aborted).toBe(true);
    expect(link.signal.reason).toBe('gone');
    expect(getEventListeners(a.signal, 'abort')).toHaveLength(0);
  });

  it('unlink() takes its listeners off both sources: a long-lived source holds nothing of a settled call', () => {
    const long = new AbortController();
    for (let i = 0; i < 100; i++) {
      const call = new AbortController();
      const link = linkedSignal(call.signal, long.signal);
      expect(getEventListeners(long.signal, 'abort')).toHaveLength(1);
      link.unlink();
      expect(getEventListeners(call.signal, 'abort')).toHaveLength(0);
    }
    expect(getEventListeners(long.signal, 'abort')).toHaveLength(0);
    long.abort();
  });

  it('after unlink() a source aborting no longer reaches the signal', () => {
    const a = new AbortController();
    const b = new AbortController();
    const link = linkedSignal(a.signal, b.signal);
    link.unlink();
    b.abort();
    expect(link.signal.aborted).toBe(false);
  });
});
