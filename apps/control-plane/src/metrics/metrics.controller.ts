import { Controller, Get, Header } from '@nestjs/common';
import { ControlPlaneMetrics } from './control-plane-metrics';

/** `GET /metrics` in Prometheus text format; needs an API key (viewer), like the rest of the admin API. */
@Controller()
export class MetricsController {
  constructor(private readonly metrics: ControlPlaneMetrics) {}

  @Get('metrics')
  @Header('content-type', 'text/plain; version=0.0.4; charset=utf-8')
  scrape(): Promise<string> {
    return this.metrics.registry.metrics();
  }
}
