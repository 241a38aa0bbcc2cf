import { Controller, Get, Header } from '@nestjs/common';
import { ApiOkResponse, ApiOperation } from '@nestjs/swagger';
import { AdminController } from '../http/admin-docs';
import { ControlPlaneMetrics } from './control-plane-metrics';

/** `GET /metrics` in Prometheus text format; needs an API key (viewer), like the rest of the admin API. */
@Controller()
@AdminController()
export class MetricsController {
  constructor(private readonly metrics: ControlPlaneMetrics) {}

  @Get('metrics')
  @Header('content-type', 'text/plain; version=0.0.4; charset=utf-8')
  @ApiOperation({ summary: 'Prometheus metrics (text format 0.0.4); needs an API key (viewer)' })
  @ApiOkResponse({ description: 'metrics', content: { 'text/plain': { schema: { type: 'string' } } } })
  scrape(): Promise<string> {
    return this.metrics.registry.metrics();
  }
}
