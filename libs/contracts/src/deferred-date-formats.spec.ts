import { withDeferredDateTimeFormats } from './deferred-date-formats';

describe('withDeferredDateTimeFormats (ADRs 0024, 0048)', () => {
  const Original = Intl.DateTimeFormat;
  let built: unknown[][];

  beforeEach(() => {
    built = [];
    Intl.DateTimeFormat = new Proxy(Original, {
      construct: (target, args, newTarget) => {
        built.push(args);
        return Reflect.construct(target, args, newTarget) as object;
      },
    });
  });
  afterEach(() => {
    Intl.DateTimeFormat = Original;
  });

  const options: Intl.DateTimeFormatOptions = { timeZone: 'UTC', year: 'numeric', hour: 'numeric' };
  const at = Date.UTC(2026, 11, 2, 7, 5, 9);

  it('builds no formatter while loading, and the real one, with the same arguments, on first use', () => {
    const formatter = withDeferredDateTimeFormats(() => new Intl.DateTimeFormat('en-GB', options));
    expect(built).toEqual([]);
    expect(formatter.format(at)).toBe(new Original('en-GB', options).format(at));
    expect(built).toEqual([['en-GB', options]]);
    expect(formatter.formatToParts(at)).toEqual(new Original('en-GB', options).formatToParts(at));
    expect(formatter.resolvedOptions().timeZone).toBe('UTC');
    expect(built).toHaveLength(1); // once, however often it is used
    expect(formatter).toBeInstanceOf(Original);
  });

  it('puts the global back after loading, even when loading throws', () => {
    const before = Intl.DateTimeFormat;
    expect(withDeferredDateTimeFormats(() => Intl.DateTimeFormat === before)).toBe(false);
    expect(Intl.DateTimeFormat).toBe(before);
    expect(() =>
      withDeferredDateTimeFormats(() => {
        throw new Error('load failed');
      }),
    ).toThrow('load failed');
    expect(Intl.DateTimeFormat).toBe(before);
    new Intl.DateTimeFormat('en-GB', options);
    expect(built).toHaveLength(1);
  });

  it('keeps supportedLocalesOf and a formatter built without `new`', () => {
    const formatter = withDeferredDateTimeFormats(() => {
      expect(Intl.DateTimeFormat.supportedLocalesOf(['en-GB'])).toEqual(['en-GB']);
      return (
        Intl.DateTimeFormat as unknown as (l: string, o: Intl.DateTimeFormatOptions) => Intl.DateTimeFormat
      )('en-GB', options);
    });
    expect(built).toEqual([]);
    expect(formatter.format(at)).toBe(new Original('en-GB', options).format(at));
  });
});
