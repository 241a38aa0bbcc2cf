import type { JournalRecord } from './journal-record';
import { RestartAction, restartAction } from './restart-action';
import { JOURNAL_LIMITS } from './journal-states';
import { WorkerJournal } from './worker-journal';

/** R-WRK-1: at most 16 records handled per tick. */
export const RESTART_SCAN_PER_TICK = 16;

export interface RestartItem {
  readonly record: JournalRecord;
  readonly action: RestartAction;
}

/**
 * The restart scan over the journal: pages of ≤ 64 read lazily, handed out ≤ 16 records per tick,
 * each with what R-WRK-2 prescribes. `stopPulling` turns true once any record needs recovery; the
 * lifecycle pulls only after `done` and never while `stopPulling`.
 */
export class RestartScan {
  private buffer: JournalRecord[] = [];
  private cursor: string | null = null;
  private exhausted = false;
  private recovery = false;

  constructor(
    private readonly journal: WorkerJournal,
    private readonly pageSize: number = JOURNAL_LIMITS.maxPage,
    private readonly perTick: number = RESTART_SCAN_PER_TICK,
  ) {
    if (perTick < 1 || perTick > RESTART_SCAN_PER_TICK) {
      throw new RangeError(`restart scan handles 1..${RESTART_SCAN_PER_TICK} records per tick`);
    }
  }

  get done(): boolean {
    return this.exhausted && this.buffer.length === 0;
  }

  get stopPulling(): boolean {
    return this.recovery;
  }

  /** The next ≤ perTick records and their actions; reads at most one more page. */
  async tick(): Promise<readonly RestartItem[]> {
    if (this.buffer.length < this.perTick && !this.exhausted) {
      const page = await this.journal.page(this.cursor, this.pageSize);
      this.buffer.push(...page.records);
      this.cursor = page.next;
      this.exhausted = page.next === null;
    }
    const items = this.buffer.splice(0, this.perTick).map((record) => ({
      record,
      action: restartAction(record),
    }));
    if (items.some((i) => i.action.kind === 'stop_pulling' || i.action.kind === 'mark_recovery_required')) {
      this.recovery = true;
    }
    return items;
  }
}
