/** What one key may spend: tokens per second, and the most it may hold (the bucket's size). */
export interface Allowance {
  readonly perSecond: number;
  readonly burst: number;
}

interface Bucket {
  tokens: number;
  at: number;
  allowance: Allowance;
}

/**
 * A token bucket per key, each with its own allowance; the least recently used bucket is forgotten
 * once the map is full (it comes back full, with the default allowance, on its next call).
 */
export class RateLimiter {
  private readonly buckets = new Map<string, Bucket>();

  constructor(
    /** The allowance of a key nobody has sized (`resize`). */
    private readonly fallback: Allowance,
    private readonly now: () => number = () => performance.now(),
    private readonly maxKeys = 10_000,
  ) {}

  /** Spends one token of `key`: 0 when there was one, else the milliseconds until there will be. */
  take(key: string): number {
    const bucket = this.touch(key);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return 0;
    }
    return Math.ceil(((1 - bucket.tokens) / bucket.allowance.perSecond) * 1000);
  }

  /**
   * Gives `key` another allowance from now on. A bigger bucket is topped up by what it grew, so a key
   * sized up is not held to the smaller bucket it emptied; a smaller one keeps what still fits.
   */
  resize(key: string, allowance: Allowance): void {
    const bucket = this.touch(key);
    const grown = Math.max(0, allowance.burst - bucket.allowance.burst);
    bucket.allowance = allowance;
    bucket.tokens = Math.min(allowance.burst, bucket.tokens + grown);
  }

  /** The key's bucket refilled up to now, moved to the most recently used end of the map. */
  private touch(key: string): Bucket {
    const now = this.now();
    let bucket = this.buckets.get(key);
    if (!bucket) {
      if (this.buckets.size >= this.maxKeys) this.buckets.delete(this.buckets.keys().next().value!);
      bucket = { tokens: this.fallback.burst, at: now, allowance: this.fallback };
    } else {
      this.buckets.delete(key); // re-insert: the map's order is least recently used first
    }
    const { perSecond, burst } = bucket.allowance;
    bucket.tokens = Math.min(burst, bucket.tokens + ((now - bucket.at) / 1000) * perSecond);
    bucket.at = now;
    this.buckets.set(key, bucket);
    return bucket;
  }
}
