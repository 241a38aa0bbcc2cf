import { Inject, Injectable, OnModuleInit } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import type { FastifyInstance } from 'fastify';
import { ControlPlaneMetrics, Listener } from './control-plane-metrics';

export const METRICS_LISTENER = Symbol('MetricsListener');

/** Times every answer of one listener, labelled by route pattern (`unmatched` for none), never by URL. */
@Injectable()
export class HttpMetricsHook implements OnModuleInit {
  constructor(
    private readonly adapter: HttpAdapterHost,
    private readonly metrics: ControlPlaneMetrics,
    @Inject(METRICS_LISTENER) private readonly listener: Listener,
  ) {}

  onModuleInit(): void {
    const fastify = this.adapter.httpAdapter.getInstance<FastifyInstance>();
    // Callback style: an async hook costs a promise and a microtask turn on every answer.
    fastify.addHook('onResponse', (request, reply, done) => {
      const route = request.routeOptions.url ?? 'unmatched';
      this.metrics.httpRequest(
        this.listener,
        route,
        request.method,
        reply.statusCode,
        reply.elapsedTime / 1000,
      );
      done();
    });
  }
}
