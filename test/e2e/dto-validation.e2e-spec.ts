import { Type } from '@nestjs/common';
import { ROUTE_ARGS_METADATA } from '@nestjs/common/constants';
import { ModulesContainer } from '@nestjs/core';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { ingressPath } from '@ql/contracts';
import { dtoFields } from '../../apps/control-plane/src/http/validation/dto-fields';
import { snapshotDatabase } from '../support/db-snapshot';
import { newSessionId, registerBody, validCapabilities } from '../support/fixtures';
import {
  Dialect,
  HttpResult,
  TestDatabase,
  TestPlane,
  createTestDatabase,
  createTestPki,
  readPair,
  startTestPlane,
} from '../support/test-plane';

/**
 * Request DTOs at the HTTP edge of both listeners: unknown fields refused at any depth (never
 * stripped), numbers never read from strings, array items named by index; the field named in each
 * listener's own error shape; nothing written. Identity still comes first (guards before pipes).
 */
const gpu = (overrides: Record<string, unknown> = {}) => ({
  vendor: 'nvidia',
  model: 'A100',
  memoryMiB: 40960,
  features: ['cuda'],
  ...overrides,
});
const withCapabilities = (overrides: Record<string, unknown>) =>
  registerBody({ capabilities: validCapabilities(overrides) });
const task = (overrides: Record<string, unknown> = {}) => ({
  name: `dto-${Math.random().toString(36).slice(2)}`,
  command: 'echo hi',
  runtime: 'shell',
  ...overrides,
});

/** Every handler's @Body() parameter type, across the application's controllers. */
function bodyTypes(app: NestFastifyApplication): { handler: string; type: unknown }[] {
  const found: { handler: string; type: unknown }[] = [];
  for (const module of app.get(ModulesContainer).values())
    for (const { metatype } of module.controllers.values()) {
      const controller = metatype as Type<unknown>;
      for (const name of Object.getOwnPropertyNames(controller.prototype)) {
        const args: Record<string, { index: number }> =
          Reflect.getMetadata(ROUTE_ARGS_METADATA, controller, name) ?? {};
        const types: unknown[] = Reflect.getMetadata('design:paramtypes', controller.prototype, name) ?? [];
        for (const [key, { index }] of Object.entries(args))
          if (key.startsWith('3:')) found.push({ handler: `${controller.name}.${name}`, type: types[index] });
      }
    }
  return found;
}

describe.each<Dialect>(['sqlite', 'postgres'])('request DTOs at the edge (%s)', (dialect) => {
  let db: TestDatabase;
  let pki: Awaited<ReturnType<typeof createTestPki>>;
  let t: TestPlane;
  let heartbeatPath: string;

  beforeAll(async () => {
    db = await createTestDatabase(dialect);
    pki = await createTestPki(['worker-a', 'worker-b']);
    t = await startTestPlane(db, pki, { QL_INGRESS_RATE_BURST: '100000' });
    const session = newSessionId();
    heartbeatPath = ingressPath('worker-b', session, 'heartbeat');
    const registered = await t.ingress(
      readPair(pki.workers['worker-b']!),
      ingressPath('worker-b', session, 'register'),
      registerBody(),
    );
    expect(registered.status).toBe(200);
  });
  afterAll(async () => {
    await t?.close();
    await db?.dispose();
    pki?.remove();
  });

  /** 400 in the listener's own shape, with exactly this message, and not one row changed. */
  const expectRefused = async (send: () => Promise<HttpResult>, expected: Record<string, unknown>) => {
    const before = await snapshotDatabase(t.plane.core.db);
    const res = await send();
    expect({ status: res.status, body: res.body }).toEqual({
      status: 400,
      body: expect.objectContaining(expected),
    });
    expect(await snapshotDatabase(t.plane.core.db)).toEqual(before);
  };

  it('every request body of both listeners is a DTO class', () => {
    const bodies = [...bodyTypes(t.plane.admin), ...bodyTypes(t.plane.ingress)];
    // 16 (two of secrets, the console's sign-in), plus the five activation actions (starting, running,
    // start-failure, completion, logs), enroll, certificate, secrets and the bundle fetch (the bundle
    // upload takes a raw body, not JSON: ADR 0051), and the four of env vars (create, change, order,
    // import: ADR 0061), a task's state (enabled, pinned) and bulk actions (issue 31 item 3).
    expect(bodies.length).toBe(31);
    expect(
      bodies.filter(({ type }) => typeof type !== 'function' || !dtoFields(type as Type<unknown>)),
    ).toEqual([]);
  });

  describe('ingress: {code: invalid_worker_request, message} naming the field', () => {
    const register = (body: unknown) =>
      t.ingress(
        readPair(pki.workers['worker-a']!),
        ingressPath('worker-a', newSessionId(), 'register'),
        body,
      );
    const heartbeat = (body: unknown) => t.ingress(readPair(pki.workers['worker-b']!), heartbeatPath, body);

    it.each<[string, () => unknown, string]>([
      ['an unknown top-level field', () => registerBody({ colour: 'blue' }), 'colour: unknown_field'],
      [
        'an unknown capability field',
        () => withCapabilities({ cpuCount: 4 }),
        'capabilities.cpuCount: unknown_field',
      ],
      [
        'an unknown field in a GPU',
        () => withCapabilities({ gpus: [gpu(), gpu({ fan: 'quiet' })] }),
        'capabilities.gpus[1].fan: unknown_field',
      ],
      [
        'a `constructor` member (class-transformer would drop it)',
        () => ({ ...registerBody(), constructor: 'x' }),
        'constructor: unknown_field',
      ],
      [
        'a numeric string for an integer',
        () => registerBody({ maxConcurrentRuns: '4' }),
        'maxConcurrentRuns: must_be_integer',
      ],
      [
        'a numeric string in a GPU',
        () => withCapabilities({ gpus: [gpu({ memoryMiB: '40960' })] }),
        'capabilities.gpus[0].memoryMiB: must_be_integer',
      ],
      [
        'a runtime that is not an object',
        () => withCapabilities({ runtimes: [{ name: 'node', version: '20.0.0' }, 'python'] }),
        'capabilities.runtimes[1]: must_be_object',
      ],
      [
        'a runtime without a version',
        () => withCapabilities({ runtimes: [{ name: 'node' }] }),
        'capabilities.runtimes[0].version: must_be_string',
      ],
      [
        'an executor that is not a string',
        () => withCapabilities({ executors: ['local-process', 7] }),
        'capabilities.executors[1]: must_be_string',
      ],
      [
        'a label value with a control character',
        () => withCapabilities({ labels: { zone: 'a\u0007' } }),
        'capabilities.labels.zone: control_character',
      ],
      ['a body that is an array', () => [registerBody()], 'body: must_be_object'],
    ])('register with %s is 400 and registers nothing', async (_name, body, message) => {
      await expectRefused(() => register(body()), { code: 'invalid_worker_request', message });
    });

    it.each<[string, unknown, string]>([
      [
        'a numeric string generation',
        { generation: '1', expectedVersion: 0, availableSlots: 1 },
        'generation: must_be_integer',
      ],
      [
        'an unknown field',
        { generation: 1, expectedVersion: 0, availableSlots: 1, slots: 1 },
        'slots: unknown_field',
      ],
      [
        'a fractional slot count',
        { generation: 1, expectedVersion: 0, availableSlots: 1.5 },
        'availableSlots: must_be_integer',
      ],
    ])('heartbeat with %s is 400 and changes nothing', async (_name, body, message) => {
      await expectRefused(() => heartbeat(body), { code: 'invalid_worker_request', message });
    });

    it('a certificate for another worker with a bad body is 401: identity before the body', async () => {
      const res = await t.ingress(readPair(pki.workers['worker-a']!), heartbeatPath, { generation: '1' });
      expect(res.status).toBe(401);
      expect(res.body).toMatchObject({ code: 'worker_authentication_required' });
    });
  });

  describe('admin: problem+json invalid_request with the field in `detail`', () => {
    it.each<[string, () => unknown, string]>([
      ['an unknown top-level field', () => task({ owner: 'me' }), 'owner: unknown_field'],
      [
        'an unknown placement field',
        () => task({ placement: { required: { colour: 'blue' } } }),
        'placement.required.colour: unknown_field',
      ],
      [
        'an unknown field in a preferred label',
        () => task({ placement: { preferred: [{ key: 'zone', value: 'a', weight: 1, hard: true }] } }),
        'placement.preferred[0].hard: unknown_field',
      ],
      ['a numeric string timeout', () => task({ timeoutMs: '5000' }), 'timeoutMs: must_be_integer'],
      [
        'a numeric string weight',
        () => task({ placement: { preferred: [{ key: 'zone', value: 'a', weight: '5' }] } }),
        'placement.preferred[0].weight: must_be_integer',
      ],
      [
        'a runtime requirement of the wrong shape',
        () => task({ placement: { required: { runtimes: [{ name: 'node', range: 20 }] } } }),
        'placement.required.runtimes[0].range: must_be_string',
      ],
      ['a retry policy that is a string', () => task({ retry: '3 times' }), 'retry: must_be_object'],
      ['an env value that is a number', () => task({ env: { HOME: 1 } }), 'env.HOME: must_be_string'],
    ])('create a task with %s is 400 and writes nothing', async (_name, body, detail) => {
      await expectRefused(() => t.admin('POST', '/api/v1/tasks', body()), {
        code: 'invalid_request',
        detail,
      });
    });

    it('env keys named like Object members reach the task (class-transformer would drop them)', async () => {
      const env = { constructor: 'c', toString: 't', hasOwnProperty: 'h' };
      const res = await t.admin('POST', '/api/v1/tasks', task({ env }));
      expect(res.status).toBe(201);
      expect((res.body as { spec: { env: unknown } }).spec.env).toEqual(env);
    });

    it('a numeric string priority on a trigger is 400, not a run of priority 5', async () => {
      const created = await t.admin('POST', '/api/v1/tasks', task());
      const id = (created.body as { id: string }).id;
      await expectRefused(() => t.admin('POST', `/api/v1/tasks/${id}/runs`, { priority: '5' }), {
        code: 'invalid_request',
        detail: 'priority: must_be_integer',
      });
    });

    it('an API key request with an unknown field is 400 naming it', async () => {
      await expectRefused(
        () => t.admin('POST', '/api/v1/api-keys', { name: 'x', role: 'viewer', scopes: [] }),
        {
          code: 'invalid_request',
          detail: 'scopes: unknown_field',
        },
      );
    });

    it('without an API key a bad body is 401: identity before the body', async () => {
      const res = await t.admin('POST', '/api/v1/tasks', task({ owner: 'me', timeoutMs: '1' }), null);
      expect(res.status).toBe(401);
      expect(res.body).toMatchObject({ code: 'authentication_required' });
    });
  });
});
