import { Readable } from 'node:stream';
import { Body, Controller, HttpCode, Inject, Param, Post, StreamableFile, UseGuards } from '@nestjs/common';
import { ApiProduces } from '@nestjs/swagger';
import { BUNDLE_MEDIA_TYPE, INGRESS_SESSION_ROUTE, parseBundleRequest } from '@ql/contracts';
import { BUNDLE_REPOSITORY, BundleRepository } from '@ql/domain';
import { IngressController, IngressOperation } from '../http/ingress-docs';
import { MtlsPrincipalGuard, Principal } from '../identity/mtls-principal.guard';
import { WorkerPrincipal } from '../identity/worker-principal';
import { leaseFenceCommand } from '../leases/lease-fence-command';
import { BundleFetchDto } from './dto/bundle.dto';
import { bundleChunks } from './bundle-workdirs';

/**
 * Issue 19 item 3 (ADR 0051): the worker fetches a bundle by digest under the fences of every lease
 * call (session, then lease: holder, token, generation, active, in term) and only for an attempt
 * whose revision pins it. A POST like every ingress call: the fence carries the lease token, which
 * must never sit in a URL. The answer is the `.tar.gz` bytes, streamed from the database in 1 MiB
 * reads; the worker checks their SHA-256 against the digest.
 */
@Controller(INGRESS_SESSION_ROUTE)
@UseGuards(MtlsPrincipalGuard)
@IngressController()
export class BundleIngressController {
  constructor(@Inject(BUNDLE_REPOSITORY) private readonly bundles: BundleRepository) {}

  @Post('bundle')
  @HttpCode(200)
  @ApiProduces('application/octet-stream')
  @IngressOperation(
    'bundle',
    "The pinned bundle's .tar.gz bytes (application/octet-stream) for the lease holder whose attempt pins `digest`; 404 for any other digest",
    {
      description: 'the bundle bytes',
      content: { 'application/octet-stream': { schema: { type: 'string', format: 'binary' } } },
    },
    ['worker_session_fenced', 'worker_lease_fenced', 'worker_route_not_found'],
  )
  async fetch(@Principal() p: WorkerPrincipal, @Param('sessionId') s: string, @Body() body: BundleFetchDto) {
    const { digest, ...fence } = parseBundleRequest(body);
    const bundle = await this.bundles.authorizeFetch(leaseFenceCommand(p, s, fence), digest);
    return new StreamableFile(Readable.from(bundleChunks(this.bundles, bundle)), {
      type: BUNDLE_MEDIA_TYPE,
      length: bundle.sizeBytes,
    });
  }
}
