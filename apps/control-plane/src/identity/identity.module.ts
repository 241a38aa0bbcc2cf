import { Module } from '@nestjs/common';
import { ApiKeyGuard } from './api-key.guard';
import { CertificateForks } from './certificate-forks';
import { IngressRateLimit } from './ingress-rate-limit';
import { MtlsPrincipalGuard } from './mtls-principal.guard';
import { PrincipalStanding } from './principal-standing';
import { RevocationCache } from './revocation-cache';
import { SessionWireVersions } from './session-wire-versions';

/**
 * Who is calling: the worker principal from the verified client certificate (mTLS guard, with the
 * certificate revocation cache and the per-worker rate limit), and admin callers by API key and role.
 * Both guards decide before any other repository call. `IngressRateLimit` is provided here once, so
 * the guard instances of every ingress module share its buckets (the registry sizes them).
 */
const IDENTITY = [
  MtlsPrincipalGuard,
  PrincipalStanding,
  RevocationCache,
  ApiKeyGuard,
  IngressRateLimit,
  CertificateForks,
  SessionWireVersions,
];

@Module({ providers: IDENTITY, exports: IDENTITY })
export class IdentityModule {}
