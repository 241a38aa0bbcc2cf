import { CAPABILITY_LIMITS, MAX_CONCURRENT_RUNS } from '@ql/domain';
import {
  CapabilitiesRequest,
  GpuCapabilityRequest,
  PROTOCOL_VERSION_MAX,
  RegisterRequest,
  RuntimeCapabilityRequest,
  SOFTWARE_VERSION_MAX_LENGTH,
  SUPPORTED_PROTOCOL_VERSIONS,
} from '@ql/contracts';
import {
  IntField,
  NestedField,
  TextField,
  TextListField,
  TextMapField,
} from '../../http/validation/dto-fields';
import { TOKEN, labelMap, tokenSet } from '../../http/validation/wire-rules';

/**
 * `register` body (R-REG-2, R-REG-3): its shape. Semver validity, duplicates in sets, the 16 KiB
 * canonical size, `availableSlots ≤ maxConcurrentRuns` and the supported protocol are the contract's
 * (`ingress/register.ts`: parseRegistration, with the domain's canonicalizeCapabilities).
 */
const MiB = (description: string) => IntField(0, CAPABILITY_LIMITS.mebibytes, { description });

export class RuntimeCapabilityDto implements RuntimeCapabilityRequest {
  @TextField(TOKEN)
  name!: string;

  @TextField({ max: CAPABILITY_LIMITS.versionLength }, { description: 'semver', example: '20.20.2' })
  version!: string;
}

export class GpuCapabilityDto implements GpuCapabilityRequest {
  @TextField(TOKEN)
  vendor!: string;

  @TextField({ max: CAPABILITY_LIMITS.modelLength })
  model!: string;

  @MiB('memory of this GPU')
  memoryMiB!: number;

  @TextListField(tokenSet(CAPABILITY_LIMITS.features), { presence: 'nullable' })
  features?: string[] | null;
}

export class CapabilitiesDto implements CapabilitiesRequest {
  @TextField(TOKEN, { example: 'x64' })
  architecture!: string;

  @TextField(TOKEN, { example: 'linux' })
  operatingSystem!: string;

  @TextListField(tokenSet(CAPABILITY_LIMITS.executors), { example: ['local-process'] })
  executors!: string[];

  @NestedField(() => RuntimeCapabilityDto, { maxItems: CAPABILITY_LIMITS.runtimes })
  runtimes!: RuntimeCapabilityDto[];

  @TextMapField(labelMap(CAPABILITY_LIMITS.labels), {
    presence: 'nullable',
    description: 'placement labels; values are never logged',
  })
  labels?: Record<string, string> | null;

  @MiB('memory the worker offers')
  memoryMiB!: number;

  @MiB('disk the worker offers')
  diskMiB!: number;

  @NestedField(() => GpuCapabilityDto, { maxItems: CAPABILITY_LIMITS.gpus, presence: 'nullable' })
  gpus?: GpuCapabilityDto[] | null;

  @TextListField(tokenSet(CAPABILITY_LIMITS.features), { presence: 'nullable' })
  features?: string[] | null;
}

export class RegisterDto implements RegisterRequest {
  @NestedField(() => CapabilitiesDto, {
    description: `canonical JSON (sorted keys and sets) at most ${CAPABILITY_LIMITS.canonicalBytes / 1024} KiB; its SHA-256 is the capability digest`,
  })
  capabilities!: CapabilitiesDto;

  @IntField(1, MAX_CONCURRENT_RUNS)
  maxConcurrentRuns!: number;

  @IntField(0, MAX_CONCURRENT_RUNS, {
    description: 'what the worker can take right now; at most maxConcurrentRuns',
  })
  availableSlots!: number;

  @TextField({ max: SOFTWARE_VERSION_MAX_LENGTH }, { description: 'semver', example: '0.1.0' })
  softwareVersion!: string;

  @IntField(1, PROTOCOL_VERSION_MAX, {
    description: `the highest protocol version the worker speaks; served: ${SUPPORTED_PROTOCOL_VERSIONS.join(', ')} (3: wire v1, 4: wire v2); another is 400 \`protocol_unsupported\` and the worker registers again with the next lower one it speaks (ADR 0060)`,
    example: SUPPORTED_PROTOCOL_VERSIONS[SUPPORTED_PROTOCOL_VERSIONS.length - 1],
  })
  protocolVersion!: number;
}
