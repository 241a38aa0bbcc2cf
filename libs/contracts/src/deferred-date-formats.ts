/**
 * ADR 0024 (the control plane) and ADR 0048 (the worker): `@nestjs/common` builds two
 * `Intl.DateTimeFormat`s when it is imported (the timestamps of its console logger). Building the first one makes ICU load its locale, calendar and time-zone data:
 * ~7 MiB of an idle control plane's or worker's RSS (pages of the `node` binary's ICU data, and ICU's
 * own heap), for formatters neither calls (both log JSON lines with ISO times).
 *
 * While `load` runs, `Intl.DateTimeFormat` hands out formatters that build the real one (with the same
 * arguments) on first use; afterwards the global is the one it was. A deferred formatter is an
 * `Intl.DateTimeFormat` to `instanceof`, and a late `RangeError` for bad arguments is the only
 * difference a caller could see (Nest's arguments are constants).
 */
export function withDeferredDateTimeFormats<T>(load: () => T): T {
  const Real = Intl.DateTimeFormat;
  const deferred = function DateTimeFormat(
    locales?: string | string[],
    options?: Intl.DateTimeFormatOptions,
  ) {
    let real: Intl.DateTimeFormat | undefined;
    const materialize = () => (real ??= new Real(locales, options));
    return new Proxy(Object.create(Real.prototype) as Intl.DateTimeFormat, {
      get(_target, key) {
        const formatter = materialize();
        const value: unknown = Reflect.get(formatter, key, formatter);
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(formatter) : value;
      },
    });
  };
  Object.defineProperties(deferred, {
    prototype: { value: Real.prototype },
    supportedLocalesOf: { value: Real.supportedLocalesOf.bind(Real) },
  });
  Intl.DateTimeFormat = deferred as unknown as typeof Intl.DateTimeFormat;
  try {
    return load();
  } finally {
    Intl.DateTimeFormat = Real;
  }
}
