import { CAPABILITY_LIMITS, PLACEMENT_LIMITS } from '@ql/domain';
import {
  IntField,
  NestedField,
  TextField,
  TextListField,
  TextMapField,
} from '../../http/validation/dto-fields';
import { LABEL_KEY, LABEL_VALUE, TOKEN, labelMap, tokenSet } from '../../http/validation/wire-rules';

/**
 * A task's placement spec (R-PLC-1): its shape. Semver ranges, duplicates and canonical order are
 * the domain's (parsePlacementSpec).
 */
export class RuntimeRequirementDto {
  @TextField(TOKEN)
  name!: string;

  @TextField({ max: PLACEMENT_LIMITS.rangeLength }, { description: 'semver range', example: '>=20' })
  range!: string;
}

export class GpuRequirementDto {
  @TextField(TOKEN)
  vendor!: string;

  @TextListField(tokenSet(PLACEMENT_LIMITS.gpuFeatures), { presence: 'nullable' })
  features?: string[] | null;
}

const MiB = IntField(0, CAPABILITY_LIMITS.mebibytes, { presence: 'optional', default: 0 });

export class RequiredPlacementDto {
  @TextListField(tokenSet(PLACEMENT_LIMITS.architectures), {
    presence: 'nullable',
    description: 'any of; [] = any',
  })
  architectures?: string[] | null;

  @TextListField(tokenSet(PLACEMENT_LIMITS.operatingSystems), {
    presence: 'nullable',
    description: 'any of; [] = any',
  })
  operatingSystems?: string[] | null;

  @TextListField(tokenSet(PLACEMENT_LIMITS.executors), { presence: 'nullable', description: 'all of' })
  executors?: string[] | null;

  @NestedField(() => RuntimeRequirementDto, {
    maxItems: PLACEMENT_LIMITS.runtimes,
    presence: 'nullable',
    description: 'one per runtime name; each needs a worker runtime whose version satisfies the range',
  })
  runtimes?: RuntimeRequirementDto[] | null;

  @TextMapField(labelMap(PLACEMENT_LIMITS.labels), {
    presence: 'nullable',
    description: 'every one must be present with exactly this value',
  })
  labels?: Record<string, string> | null;

  @MiB
  minMemoryMiB?: number;

  @MiB
  minDiskMiB?: number;

  @NestedField(() => GpuRequirementDto, {
    presence: 'nullable',
    description: 'some worker GPU of this vendor having every feature',
  })
  gpu?: GpuRequirementDto | null;

  @TextField(
    { max: PLACEMENT_LIMITS.rangeLength },
    {
      presence: 'nullable',
      description:
        "semver range the worker's software version must satisfy (a task waits for upgraded workers); absent = any",
      example: '>=0.2.0',
    },
  )
  workerVersion?: string | null;

  @IntField(1, 2, {
    presence: 'optional',
    description:
      'lowest wire version the worker session must speak (1 = any; 2 is added to a run that maps secrets or names a bundle)',
  })
  wireVersion?: number;
}

export class PreferredLabelDto {
  @TextField(LABEL_KEY)
  key!: string;

  @TextField(LABEL_VALUE)
  value!: string;

  @IntField(1, PLACEMENT_LIMITS.maxWeight)
  weight!: number;
}

export class PlacementSpecDto {
  @NestedField(() => RequiredPlacementDto, { presence: 'nullable' })
  required?: RequiredPlacementDto | null;

  @NestedField(() => PreferredLabelDto, {
    maxItems: PLACEMENT_LIMITS.preferred,
    presence: 'nullable',
    description: 'orders matching workers only',
  })
  preferred?: PreferredLabelDto[] | null;
}
