/** A line diff of two texts (longest common subsequence; specs are small). */
export function lineDiff(before: string, after: string): { kind: ' ' | '-' | '+'; line: string }[] {
  const a = before.split('\n');
  const b = after.split('\n');
  const lcs: number[][] = Array.from({ length: a.length + 1 }, () => new Array<number>(b.length + 1).fill(0));
  for (let i = a.length - 1; i >= 0; i--)
    for (let j = b.length - 1; j >= 0; j--)
      lcs[i]![j] = a[i] === b[j] ? lcs[i + 1]![j + 1]! + 1 : Math.max(lcs[i + 1]![j]!, lcs[i]![j + 1]!);
  const out: { kind: ' ' | '-' | '+'; line: string }[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    if (a[i] === b[j]) {
      out.push({ kind: ' ', line: a[i]! });
      i++;
      j++;
    } else if (lcs[i + 1]![j]! >= lcs[i]![j + 1]!) out.push({ kind: '-', line: a[i++]! });
    else out.push({ kind: '+', line: b[j++]! });
  }
  while (i < a.length) out.push({ kind: '-', line: a[i++]! });
  while (j < b.length) out.push({ kind: '+', line: b[j++]! });
  return out;
}

export function Diff({ before, after }: { before: string; after: string }) {
  return (
    <pre class="diff" tabIndex={0}>
      {lineDiff(before, after).map((d, n) => (
        <span key={n} class={d.kind === '+' ? 'added' : d.kind === '-' ? 'removed' : ''}>
          {d.kind} {d.line}
          {'\n'}
        </span>
      ))}
    </pre>
  );
}
