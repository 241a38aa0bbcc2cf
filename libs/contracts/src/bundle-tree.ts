/**
 * What a bundle's entries make on a disk (issue 27 item 5, issue 29 item 2; ADR 0051): its folders
 * (named or implied by a path under them) and its symbolic links, resolved the way the kernel follows
 * them, against the other links of the bundle — never lexically alone, which a chain such as
 * `a/up -> ..`, `a/x0 -> up/..`, `root -> a/x0` defeats.
 */

/** A bundle link resolved through at most this many links is refused (the kernel stops at 40). */
export const MAX_LINK_HOPS = 32;

/** Where a path of the bundle leads: a path inside it (`''` is its root), out of it, or too many links. */
export type ResolvedPath =
  | { readonly kind: 'inside'; readonly path: string }
  | { readonly kind: 'outside' }
  | { readonly kind: 'too_many_links' };

export class BundleTree {
  /** Symbolic links: normalized path → target as written (relative). */
  private readonly links = new Map<string, string>();
  /** Folders: named by a folder entry, or the parent of another entry. */
  private readonly folders = new Set<string>();

  /** Records one entry (the reader's normalized path). */
  add(path: string, type: 'file' | 'directory' | 'symlink' | 'hardlink', linkTarget?: string): void {
    for (let at = path.indexOf('/'); at >= 0; at = path.indexOf('/', at + 1))
      this.folders.add(path.slice(0, at));
    if (type === 'directory') this.folders.add(path);
    if (type === 'symlink') this.links.set(path, linkTarget!);
  }

  /** Where following `path` (relative to the root) leads, every link on the way followed. */
  resolve(path: string): ResolvedPath {
    const stack: string[] = [];
    // Components still to walk, the next one last.
    const pending = path.split('/').reverse();
    let hops = 0;
    while (pending.length > 0) {
      const part = pending.pop()!;
      if (part === '' || part === '.') continue;
      if (part === '..') {
        if (stack.length === 0) return { kind: 'outside' };
        stack.pop();
        continue;
      }
      stack.push(part);
      const target = this.links.get(stack.join('/'));
      if (target === undefined) continue;
      if (++hops > MAX_LINK_HOPS) return { kind: 'too_many_links' };
      if (target.startsWith('/')) return { kind: 'outside' };
      stack.pop();
      pending.push(...target.split('/').reverse());
    }
    return { kind: 'inside', path: stack.join('/') };
  }

  /** Where the link at `path` leads: its target walked from the link's own folder. */
  resolveLink(path: string): ResolvedPath {
    const slash = path.lastIndexOf('/');
    const target = this.links.get(path);
    if (target === undefined) throw new RangeError(`"${path}" is not a link of the bundle`);
    return this.resolve(slash < 0 ? target : `${path.slice(0, slash)}/${target}`);
  }

  /** Every link of the bundle, in the order they came. */
  linkPaths(): IterableIterator<string> {
    return this.links.keys();
  }

  /** True when `path`, followed through the bundle's links, is one of its folders (or its root). */
  isFolder(path: string): boolean {
    if (path === '.' || path === '') return true;
    const resolved = this.resolve(path);
    return resolved.kind === 'inside' && (resolved.path === '' || this.folders.has(resolved.path));
  }

  /** The bundle's folders in code-unit order, the first `limit` of them, and how many there are. */
  folderList(limit: number): { readonly names: string[]; readonly total: number } {
    const all = [...this.folders].sort();
    return { names: all.slice(0, limit), total: all.length };
  }
}
