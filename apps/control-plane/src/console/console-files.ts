import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { gzipSync } from 'node:zlib';

interface ConsoleFile {
  readonly body: Buffer;
  readonly gzip: Buffer;
  readonly type: string;
}

const FILES: Record<string, string> = {
  'index.html': 'text/html; charset=utf-8',
  'assets/app.js': 'text/javascript; charset=utf-8',
  'assets/console.css': 'text/css; charset=utf-8',
};

/**
 * The built console (ADR 0052), read once at start and kept in memory with its gzip (about 70 KiB in
 * all): only these three names are ever served, so no request path reaches the file system.
 */
export class ConsoleFiles {
  private constructor(
    private readonly files: Map<string, ConsoleFile>,
    private readonly dir: string,
  ) {}

  /** `dir`: QL_CONSOLE_DIR, or empty for the build's own `dist/console`. */
  static load(dir: string): ConsoleFiles {
    const folder = dir ? resolve(dir) : builtFolder();
    const files = new Map<string, ConsoleFile>();
    for (const [name, type] of Object.entries(FILES)) {
      const path = join(folder, name);
      if (!existsSync(path)) continue;
      const body = readFileSync(path);
      files.set(name, { body, gzip: gzipSync(body, { level: 9 }), type });
    }
    return new ConsoleFiles(files, folder);
  }

  get(name: string): ConsoleFile | undefined {
    return this.files.get(name);
  }

  /** The folder when a file is missing (the console was not built), else undefined. */
  missing(): string | undefined {
    return this.files.size === Object.keys(FILES).length ? undefined : this.dir;
  }
}

/** `dist/console` beside the compiled control plane (dist/apps/control-plane/src/console), or from the sources. */
function builtFolder(): string {
  const fromDist = resolve(__dirname, '..', '..', '..', '..', 'console');
  const fromSources = resolve(__dirname, '..', '..', '..', '..', 'dist', 'console');
  return existsSync(join(fromDist, 'index.html')) ? fromDist : fromSources;
}
