import { Inject, Injectable } from '@nestjs/common';
import { WORKER_SESSION_REPOSITORY, WorkerSessionRepository } from '@ql/domain';
import { WireVersion, wireVersionOf } from '@ql/contracts';

/** Sessions a replica remembers the version of (one read each after that, on any replica). */
const MAX_REMEMBERED = 8192;

/**
 * ADR 0060 §6: the wire version of the session a call comes from, which shapes its answer. A session
 * keeps the protocol version it registered with for its whole life (a new registration is a new
 * session id), so a replica remembers it by session id: learned at register, or read once from the
 * worker's row. A session that is not the worker's current one is answered as v1 (the call is fenced
 * anyway, and a v1 answer is one every worker reads).
 */
@Injectable()
export class SessionWireVersions {
  private readonly known = new Map<string, WireVersion>();

  constructor(@Inject(WORKER_SESSION_REPOSITORY) private readonly sessions: WorkerSessionRepository) {}

  remember(sessionId: string, protocolVersion: number): void {
    const version = wireVersionOf(protocolVersion);
    if (version === undefined) return;
    if (this.known.size >= MAX_REMEMBERED) this.known.delete(this.known.keys().next().value!);
    this.known.set(sessionId, version);
  }

  async of(workerId: string, sessionId: string): Promise<WireVersion> {
    const known = this.known.get(sessionId);
    if (known !== undefined) return known;
    const worker = await this.sessions.findWorker(workerId);
    if (!worker || worker.session.sessionId !== sessionId) return 1;
    this.remember(sessionId, worker.protocolVersion);
    return this.known.get(sessionId) ?? 1;
  }
}
