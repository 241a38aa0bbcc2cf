import { Inject, Injectable } from '@nestjs/common';
import {
  PlacementExplanation,
  PlacementSpec,
  RUN_REPOSITORY,
  RunRepository,
  explainPlacement,
} from '@ql/domain';

/** How many workers one "why pending" explanation looks at. */
export const EXPLAIN_WORKERS = 1024;

/**
 * Placement as the control plane applies it (R-PLC-1..3); the rules themselves are the domain's
 * (matching, scoring, ranking), this service feeds them the current candidates.
 */
@Injectable()
export class PlacementService {
  constructor(@Inject(RUN_REPOSITORY) private readonly runs: RunRepository) {}

  /** R-PLC-3: counts per reason over the current candidates, computed when asked, never stored. */
  async explain(spec: PlacementSpec): Promise<PlacementExplanation & { computedAt: string }> {
    const { now, candidates } = await this.runs.placementCandidates(EXPLAIN_WORKERS);
    return { ...explainPlacement(spec, candidates, now), computedAt: new Date(now).toISOString() };
  }
}
