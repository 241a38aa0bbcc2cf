import { AuditEntry } from '@ql/domain';
import { RefusalAudit } from './refusal-audit';

/** The window logic of the refused-enrollment audit (issue 27 item 9) on a clock moved by hand. */
describe('RefusalAudit', () => {
  let now = 0;
  let rows: AuditEntry[] = [];
  const entry = (code: string): AuditEntry => ({
    actor: 'worker:w',
    action: 'enrollment_token.refuse',
    target: 'enrollment_token:unknown',
    detail: { code },
  });
  const make = (rowsPerWindow = 1, maxAddresses = 4096) =>
    new RefusalAudit(
      async (row) => {
        rows.push(row);
      },
      () => now,
      1000,
      rowsPerWindow,
      maxAddresses,
    );
  beforeEach(() => {
    now = 0;
    rows = [];
  });

  it('writes the first refusal of a window, counts the rest, and sums them up at the next refusal after it', async () => {
    const audit = make();
    for (let i = 0; i < 5; i++) await audit.refused('10.0.0.1', i % 2 ? 'b' : 'a', entry(i % 2 ? 'b' : 'a'));
    expect(rows).toHaveLength(1);
    expect(rows[0]!.detail).toEqual({ code: 'a', address: '10.0.0.1' });
    now = 1000; // the window is over
    await audit.refused('10.0.0.1', 'c', entry('c'));
    expect(rows.map((r) => r.action)).toEqual([
      'enrollment_token.refuse',
      'enrollment.refuse_summary',
      'enrollment_token.refuse',
    ]);
    expect(rows[1]).toMatchObject({
      actor: 'address:10.0.0.1',
      detail: { address: '10.0.0.1', refused: 4, codes: { a: 2, b: 2 } },
    });
  });

  it('a sweep writes the summaries of windows that are over, not of the open ones; a window without extra refusals writes none', async () => {
    const audit = make();
    await audit.refused('10.0.0.1', 'a', entry('a'));
    await audit.refused('10.0.0.1', 'a', entry('a'));
    await audit.refused('10.0.0.2', 'a', entry('a'));
    await audit.flush();
    expect(rows).toHaveLength(2);
    now = 1000;
    await audit.flush();
    expect(rows.slice(2)).toEqual([
      expect.objectContaining({
        action: 'enrollment.refuse_summary',
        detail: expect.objectContaining({ refused: 1 }),
      }),
    ]);
  });

  it('addresses beyond the bound share one window: the rows of a window stay bounded however many addresses', async () => {
    const audit = make(1, 3);
    for (let i = 0; i < 100; i++) await audit.refused(`10.0.1.${i}`, 'a', entry('a'));
    await audit.flush(true);
    // 3 addresses of their own, one shared window: 4 first rows and one summary of the other 96.
    expect(rows).toHaveLength(5);
    expect(rows[4]).toMatchObject({ detail: { address: '*', refused: 96 } });
  });
});
