/** Small line plots as SVG text, written by hand (no plotting package): one or more panels in a grid. */

export interface PlotSeries {
  readonly label: string;
  readonly color: string;
  /** SVG stroke-dasharray, e.g. '4 3' for a dashed line; none for solid. */
  readonly dash?: string;
  /** Thinner, paler line (a ceiling beside the figure it bounds). */
  readonly faint?: boolean;
  readonly points: readonly (readonly [number, number])[];
}

export interface PlotPanel {
  readonly title: string;
  readonly xLabel: string;
  readonly yLabel: string;
  /** x is drawn on a log10 scale (ticks at the data's x values). */
  readonly xLog: boolean;
  readonly series: readonly PlotSeries[];
}

const PANEL_W = 460;
const PANEL_H = 300;
const M = { left: 64, right: 16, top: 30, bottom: 92 };

function escapeXml(text: string): string {
  return text.replace(/[<>&"]/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', '"': '&quot;' })[c]!);
}

/** 1, 2 or 5 × a power of ten, so that about `count` ticks cover [0, max]. */
function niceStep(max: number, count: number): number {
  const raw = max / count;
  const power = 10 ** Math.floor(Math.log10(raw));
  const unit = raw / power;
  return (unit <= 1 ? 1 : unit <= 2 ? 2 : unit <= 5 ? 5 : 10) * power;
}

export function formatTick(n: number): string {
  if (n >= 1e6 && n % 1e6 === 0) return `${n / 1e6}M`;
  if (n >= 1e3 && n % 1e3 === 0) return `${n / 1e3}k`;
  return String(Number(n.toPrecision(3)));
}

function panel(p: PlotPanel, ox: number, oy: number): string {
  const w = PANEL_W - M.left - M.right;
  const h = PANEL_H - M.top - M.bottom;
  const all = p.series.flatMap((s) => s.points).filter(([, y]) => Number.isFinite(y));
  const xs = [...new Set(all.map(([x]) => x))].sort((a, b) => a - b);
  const fx = (x: number) => (p.xLog ? Math.log10(x) : x);
  const x0 = fx(xs[0] ?? 1);
  const x1 = fx(xs[xs.length - 1] ?? 10);
  const span = x1 - x0 || 1;
  const step = niceStep(Math.max(1, ...all.map(([, y]) => y)) * 1.05, 5);
  const yMax = Math.ceil((Math.max(1, ...all.map(([, y]) => y)) * 1.05) / step) * step;
  const px = (x: number) => ox + M.left + ((fx(x) - x0) / span) * w;
  const py = (y: number) => oy + M.top + h - (y / yMax) * h;
  const out: string[] = [];
  out.push(
    `<text x="${ox + M.left}" y="${oy + 18}" font-weight="bold">${escapeXml(p.title)}</text>`,
    `<rect x="${ox + M.left}" y="${oy + M.top}" width="${w}" height="${h}" fill="none" stroke="#999"/>`,
  );
  for (let y = 0; y <= yMax + step / 2; y += step) {
    out.push(
      `<line x1="${ox + M.left}" x2="${ox + M.left + w}" y1="${py(y)}" y2="${py(y)}" stroke="#eee"/>`,
      `<text x="${ox + M.left - 6}" y="${py(y) + 4}" text-anchor="end">${formatTick(y)}</text>`,
    );
  }
  for (const x of xs) {
    out.push(
      `<line x1="${px(x)}" x2="${px(x)}" y1="${oy + M.top}" y2="${oy + M.top + h}" stroke="#eee"/>`,
      `<text x="${px(x)}" y="${oy + M.top + h + 16}" text-anchor="middle">${formatTick(x)}</text>`,
    );
  }
  out.push(
    `<text x="${ox + M.left + w / 2}" y="${oy + M.top + h + 34}" text-anchor="middle">${escapeXml(p.xLabel)}</text>`,
    `<text transform="translate(${ox + 14} ${oy + M.top + h / 2}) rotate(-90)" text-anchor="middle">` +
      `${escapeXml(p.yLabel)}</text>`,
  );
  p.series.forEach((s, i) => {
    const pts = s.points.filter(([, y]) => Number.isFinite(y));
    const path = pts.map(([x, y], j) => `${j ? 'L' : 'M'}${px(x).toFixed(1)},${py(y).toFixed(1)}`).join(' ');
    const stroke = `stroke="${s.color}" stroke-width="${s.faint ? 1 : 2}"${s.dash ? ` stroke-dasharray="${s.dash}"` : ''}`;
    out.push(`<path d="${path}" fill="none" ${stroke}${s.faint ? ' opacity="0.55"' : ''}/>`);
    if (!s.faint)
      for (const [x, y] of pts)
        out.push(`<circle cx="${px(x).toFixed(1)}" cy="${py(y).toFixed(1)}" r="2.5" fill="${s.color}"/>`);
    // Legend below the axis label, two columns.
    const lx = ox + M.left + (i % 2) * (w / 2);
    const ly = oy + M.top + h + 50 + Math.floor(i / 2) * 14;
    out.push(
      `<line x1="${lx}" x2="${lx + 22}" y1="${ly - 4}" y2="${ly - 4}" ${stroke}/>`,
      `<text x="${lx + 27}" y="${ly}">${escapeXml(s.label)}</text>`,
    );
  });
  return out.join('\n');
}

/** The panels in a grid of `columns`, as one SVG document. */
export function plotSvg(panels: readonly PlotPanel[], columns: number, caption: string): string {
  const rows = Math.ceil(panels.length / columns);
  const legendRows = Math.max(0, ...panels.map((p) => Math.ceil(p.series.length / 2) - 2));
  const ph = PANEL_H + legendRows * 14;
  const width = PANEL_W * Math.min(columns, panels.length);
  const height = ph * rows + 24;
  const body = panels.map((p, i) => panel(p, (i % columns) * PANEL_W, Math.floor(i / columns) * ph));
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" ` +
      `font-family="sans-serif" font-size="11">`,
    `<rect width="${width}" height="${height}" fill="white"/>`,
    ...body,
    `<text x="8" y="${height - 8}" fill="#555">${escapeXml(caption)}</text>`,
    '</svg>',
    '',
  ].join('\n');
}
