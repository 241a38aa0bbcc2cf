import { DynamicModule, Module } from '@nestjs/common';
import { Listener } from './control-plane-metrics';
import { HttpMetricsHook, METRICS_LISTENER } from './http-metrics.hook';
import { MetricsController } from './metrics.controller';

/**
 * Prometheus metrics (prom-client). Both listeners time their requests; only the admin listener
 * serves `/metrics`. The series object itself is the core's, shared by both listeners.
 */
@Module({})
export class MetricsModule {
  static forListener(listener: Listener): DynamicModule {
    return {
      module: MetricsModule,
      controllers: listener === 'admin' ? [MetricsController] : [],
      providers: [{ provide: METRICS_LISTENER, useValue: listener }, HttpMetricsHook],
    };
  }
}
