import { cpus, loadavg, totalmem } from 'node:os';

export interface MachineInfo {
  readonly date: string;
  readonly node: string;
  readonly platform: string;
  readonly cpuCount: number;
  readonly cpuModel: string;
  readonly totalMemMiB: number;
  /** 1-minute load average when the run started: how busy the shared machine already was. */
  readonly loadAvgAtStart: number;
}

export function machineInfo(date: Date): MachineInfo {
  const list = cpus();
  return {
    date: date.toISOString(),
    node: process.version,
    platform: `${process.platform}-${process.arch}`,
    cpuCount: list.length,
    cpuModel: list[0]?.model.trim() ?? 'unknown',
    totalMemMiB: Math.round(totalmem() / 2 ** 20),
    loadAvgAtStart: Number(loadavg()[0]!.toFixed(2)),
  };
}

export interface MemoryInfo {
  readonly rssMiB: number;
  readonly peakRssMiB: number;
  readonly heapUsedMiB: number;
}

export function memoryInfo(): MemoryInfo {
  const m = process.memoryUsage();
  const mib = (bytes: number) => Number((bytes / 2 ** 20).toFixed(1));
  return {
    rssMiB: mib(m.rss),
    // resourceUsage().maxRSS is in KiB
    peakRssMiB: mib(process.resourceUsage().maxRSS * 1024),
    heapUsedMiB: mib(m.heapUsed),
  };
}

export type Align = 'left' | 'right';

/** Fixed-width text table. */
export function textTable(
  header: readonly string[],
  rows: readonly (readonly string[])[],
  align: readonly Align[],
): string {
  const all = [header, ...rows];
  const widths = header.map((_, i) => Math.max(...all.map((r) => r[i]!.length)));
  const line = (r: readonly string[]) =>
    r
      .map((c, i) => (align[i] === 'right' ? c.padStart(widths[i]!) : c.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
}

export function markdownTable(
  header: readonly string[],
  rows: readonly (readonly string[])[],
  align: readonly Align[],
): string {
  const rule = header.map((_, i) => (align[i] === 'right' ? '---:' : ':---'));
  return [header, rule, ...rows].map((r) => `| ${r.join(' | ')} |`).join('\n');
}

export function fmtInt(n: number | undefined): string {
  return n === undefined || Number.isNaN(n) ? '—' : Math.round(n).toLocaleString('en-US');
}

export function fmtPct(n: number | undefined): string {
  return n === undefined || Number.isNaN(n) ? '—' : `${(n * 100).toFixed(1)} %`;
}
