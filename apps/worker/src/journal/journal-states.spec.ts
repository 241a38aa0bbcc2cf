import { IllegalStateError } from '@ql/domain';
import { JOURNAL_STATES, JOURNAL_TRANSITIONS, assertJournalTransition, isFinished } from './journal-states';

const pairs = JOURNAL_STATES.flatMap((a) => JOURNAL_STATES.map((b) => [a, b] as const));
const allowed = new Set(
  Object.entries(JOURNAL_TRANSITIONS).flatMap(([from, tos]) => tos.map((to) => `${from}>${to}`)),
);

describe('journal transition table (R-WRK-2)', () => {
  it.each(pairs)('%s → %s is allowed exactly when the table says so', (from, to) => {
    const call = () => assertJournalTransition(from, to);
    if (allowed.has(`${from}>${to}`)) expect(call).not.toThrow();
    else expect(call).toThrow(IllegalStateError);
  });

  it('follows the happy path in order and ends in finished or recovery states only', () => {
    const path = JOURNAL_STATES.slice(0, JOURNAL_STATES.indexOf('completion_acknowledged') + 1);
    for (let i = 1; i < path.length; i++) expect(JOURNAL_TRANSITIONS[path[i - 1]!]).toContain(path[i]);
    for (const s of JOURNAL_STATES) {
      const terminal = JOURNAL_TRANSITIONS[s].length === 0;
      expect(terminal).toBe(isFinished(s) || s === 'recovery_required');
      if (!terminal) expect(JOURNAL_TRANSITIONS[s]).toContain('recovery_required');
    }
  });

  it('never goes back to launching or re-launches after a process started', () => {
    for (const s of JOURNAL_STATES) {
      if (s !== 'starting_acknowledged') expect(JOURNAL_TRANSITIONS[s]).not.toContain('launching');
    }
    expect(JOURNAL_TRANSITIONS.running_acknowledged).not.toContain('start_failed');
  });
});
