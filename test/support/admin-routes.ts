import { RequestMethod, Type } from '@nestjs/common';
import { METHOD_METADATA, PATH_METADATA } from '@nestjs/common/constants';
import { ModulesContainer, Reflector } from '@nestjs/core';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import type { ApiKeyRole } from '@ql/domain';
import { requiredRole } from '../../apps/control-plane/src/identity/api-key.guard';

export interface Route {
  readonly method: string;
  readonly url: string;
}

export interface HandlerRoute extends Route {
  /** What the guard asks of this handler, read the way the guard reads it. */
  readonly role: ApiKeyRole | 'public';
}

export const routeKey = (r: Route): string => `${r.method} ${r.url}`;

/**
 * The routes in Fastify's route tree (`printRoutes({ commonPrefix: false })`): each line is a path
 * segment under its parent, with the methods served there; HEAD is Fastify's automatic twin of GET.
 * A line of another shape fails, so a change of the tree format cannot silently hide a route.
 */
export function registeredRoutes(app: NestFastifyApplication): Route[] {
  const tree = app.getHttpAdapter().getInstance().printRoutes({ commonPrefix: false });
  const routes: Route[] = [];
  const path: string[] = [];
  for (const line of tree.split('\n').filter((l) => l.trim() !== '')) {
    const m = /^((?:[│ ] {3})*)[├└]── (\S+?)(?: \(([A-Z, ]+)\))?$/.exec(line);
    if (!m) throw new Error(`unexpected printRoutes line: ${JSON.stringify(line)}`);
    path.length = m[1]!.length / 4;
    path.push(m[2]!);
    for (const method of m[3]?.split(', ') ?? [])
      if (method !== 'HEAD') routes.push({ method, url: path.join('') });
  }
  return routes;
}

/** Every handler of every controller the application loaded, with its method, path and role. */
export function handlerRoutes(app: NestFastifyApplication): HandlerRoute[] {
  const reflector = app.get(Reflector);
  const routes: HandlerRoute[] = [];
  for (const module of app.get(ModulesContainer).values()) {
    for (const { metatype } of module.controllers.values()) {
      const controller = metatype as Type<unknown> & { prototype: Record<string, unknown> };
      const prefix = pathOf(Reflect.getMetadata(PATH_METADATA, controller));
      for (const name of Object.getOwnPropertyNames(controller.prototype)) {
        const handler = controller.prototype[name];
        if (typeof handler !== 'function' || name === 'constructor') continue;
        const path: unknown = Reflect.getMetadata(PATH_METADATA, handler);
        if (path === undefined) continue;
        const segments = [prefix, pathOf(path)].filter((s) => s !== '');
        routes.push({
          method: RequestMethod[Reflect.getMetadata(METHOD_METADATA, handler) as RequestMethod],
          url: `/${segments.join('/')}`,
          role: requiredRole(reflector, handler as () => unknown, controller),
        });
      }
    }
  }
  return routes;
}

function pathOf(value: unknown): string {
  if (typeof value !== 'string') throw new Error(`unexpected route path metadata: ${String(value)}`);
  return value.replace(/^\/+|\/+$/g, '');
}
