import { ValidationError } from '@ql/domain';
import { RegisterDto } from '../../registry/dto/register.dto';
import { HeartbeatDto } from '../../registry/dto/session-fence.dto';
import { TaskSpecDto } from '../../runs/dto/task-spec.dto';
import { TriggerRunDto } from '../../runs/dto/trigger-run.dto';
import { EdgeValidationPipe, validateBody } from './edge-validation.pipe';

/** The edge pipe on its own: what the DTO classes refuse before any domain reader runs. */
const refusal = (run: () => unknown) => {
  try {
    run();
  } catch (error) {
    if (error instanceof ValidationError) return error.message;
    throw error;
  }
  return 'accepted';
};

const capabilities = (overrides: Record<string, unknown> = {}) => ({
  architecture: 'x64',
  operatingSystem: 'linux',
  executors: ['local-process'],
  runtimes: [{ name: 'node', version: '20.0.0' }],
  memoryMiB: 256,
  diskMiB: 1024,
  ...overrides,
});
const register = (overrides: Record<string, unknown> = {}) => ({
  capabilities: capabilities(),
  maxConcurrentRuns: 4,
  availableSlots: 4,
  softwareVersion: '0.1.0',
  protocolVersion: 3,
  ...overrides,
});
const gpu = { vendor: 'nvidia', model: 'A100', memoryMiB: 1 };

describe('EdgeValidationPipe', () => {
  it('turns a valid body into its DTO instance, values untouched', () => {
    const dto = validateBody(HeartbeatDto, { generation: 1, expectedVersion: 0, availableSlots: 2 });
    expect(dto).toBeInstanceOf(HeartbeatDto);
    expect({ ...dto }).toEqual({ generation: 1, expectedVersion: 0, availableSlots: 2 });
    const nested = validateBody(RegisterDto, register({ capabilities: capabilities({ gpus: [gpu] }) }));
    expect(nested.capabilities.gpus![0]!.constructor.name).toBe('GpuCapabilityDto');
  });

  it.each<[string, () => unknown, string]>([
    [
      'an unknown field',
      () => validateBody(HeartbeatDto, { generation: 1, expectedVersion: 0, availableSlots: 1, x: 1 }),
      'x: unknown_field',
    ],
    [
      'an unknown nested field',
      () => validateBody(RegisterDto, register({ capabilities: capabilities({ cpus: 4 }) })),
      'capabilities.cpus: unknown_field',
    ],
    [
      'an unknown field in an array item',
      () =>
        validateBody(
          RegisterDto,
          register({ capabilities: capabilities({ gpus: [gpu, { ...gpu, fan: 1 }] }) }),
        ),
      'capabilities.gpus[1].fan: unknown_field',
    ],
    [
      'a numeric string',
      () => validateBody(HeartbeatDto, { generation: '1', expectedVersion: 0, availableSlots: 1 }),
      'generation: must_be_integer',
    ],
    [
      'an integer over the domain limit',
      () => validateBody(HeartbeatDto, { generation: 1, expectedVersion: 0, availableSlots: 1025 }),
      'availableSlots: out_of_range (allowed 0..1024)',
    ],
    [
      'a heartbeat recovery count over the journal bound (ADR 0029)',
      () =>
        validateBody(HeartbeatDto, {
          generation: 1,
          expectedVersion: 0,
          availableSlots: 1,
          recoveryRequired: 1025,
        }),
      'recoveryRequired: out_of_range (allowed 0..1024)',
    ],
    [
      'a heartbeat recovery count that is not an integer',
      () =>
        validateBody(HeartbeatDto, {
          generation: 1,
          expectedVersion: 0,
          availableSlots: 1,
          recoveryRequired: null,
        }),
      'recoveryRequired: must_be_integer',
    ],
    [
      'a missing field',
      () => validateBody(HeartbeatDto, { generation: 1, expectedVersion: 0 }),
      'availableSlots: must_be_integer',
    ],
    [
      'null where absence is allowed but null is not',
      () => validateBody(TaskSpecDto, { name: 'a', command: 'b', runtime: 'shell', executor: null }),
      'executor: must_be_one_of:local-process',
    ],
    [
      'an array item of the wrong shape',
      () =>
        validateBody(
          RegisterDto,
          register({
            capabilities: capabilities({ runtimes: [{ name: 'node', version: '1.0.0' }, 'python'] }),
          }),
        ),
      'capabilities.runtimes[1]: must_be_object',
    ],
    [
      'a bad item of a string list',
      () =>
        validateBody(
          RegisterDto,
          register({ capabilities: capabilities({ executors: ['local-process', 'Bad'] }) }),
        ),
      'capabilities.executors[1]: invalid_format',
    ],
    [
      'a bad map key',
      () => validateBody(TaskSpecDto, { name: 'a', command: 'b', runtime: 'shell', env: { 'NOT-OK': '1' } }),
      'env.<key>: invalid_format',
    ],
    [
      'a `constructor` member',
      () =>
        validateBody(HeartbeatDto, { generation: 1, expectedVersion: 0, availableSlots: 1, constructor: 1 }),
      'constructor: unknown_field',
    ],
    [
      'an own `__proto__` member',
      () => validateBody(TriggerRunDto, JSON.parse('{"__proto__": {"priority": 1}}')),
      '__proto__: unknown_field',
    ],
    ['null', () => validateBody(TriggerRunDto, null), 'body: must_be_object'],
    ['an array', () => validateBody(TriggerRunDto, [{}]), 'body: must_be_object'],
    ['a string', () => validateBody(TriggerRunDto, '{}'), 'body: must_be_object'],
  ])('refuses %s, naming the field', (_name, run, message) => {
    expect(refusal(run)).toBe(message);
  });

  it('keeps map members named like Object members', () => {
    const env = { constructor: 'c', toString: 't', __defineGetter__: 'g' };
    const dto = validateBody(TaskSpecDto, { name: 'a', command: 'b', runtime: 'shell', env });
    expect(dto.env).toEqual(env);
  });

  it('reads no body as {}, and leaves other parameters alone', () => {
    const pipe = new EdgeValidationPipe();
    expect({ ...(pipe.transform(undefined, { type: 'body', metatype: TriggerRunDto }) as object) }).toEqual(
      {},
    );
    expect(pipe.transform('5', { type: 'query', metatype: Number })).toBe('5');
    // A @Body() without a DTO class is a programming error, never a pass.
    expect(() => pipe.transform({}, { type: 'body', metatype: Object })).toThrow(/not a DTO class/);
  });
});
