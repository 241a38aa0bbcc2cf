import { Inject, Injectable } from '@nestjs/common';
import { WORKER_SESSION_REPOSITORY, WorkerSessionRepository, WorkerSoftware } from '@ql/domain';
import { WireVersion, wireVersionOf } from '@ql/contracts';

/** What a call of a session that is not the worker's current one is taken as (it is fenced anyway). */
const NOT_CURRENT: WorkerSoftware = Object.freeze({ wireVersion: 1, softwareVersion: '0.0.0' });

/** Sessions a replica remembers the version of (one read each after that, on any replica). */
const MAX_REMEMBERED = 8192;

/**
 * ADR 0060 §6: the wire version of the session a call comes from, which shapes its answer. A session
 * keeps the protocol version it registered with for its whole life (a new registration is a new
 * session id), so a replica remembers it by session id: learned at register, or read once from the
 * worker's row. A session that is not the worker's current one is answered as v1 (the call is fenced
 * anyway, and a v1 answer is one every worker reads). Placement reads the session's software version
 * beside it (ADR 0062), remembered the same way.
 */
@Injectable()
export class SessionWireVersions {
  private readonly remembered = new Map<string, WorkerSoftware>();

  constructor(@Inject(WORKER_SESSION_REPOSITORY) private readonly sessions: WorkerSessionRepository) {}

  remember(sessionId: string, protocolVersion: number, softwareVersion: string): void {
    const wireVersion = wireVersionOf(protocolVersion);
    if (wireVersion === undefined) return;
    if (this.remembered.size >= MAX_REMEMBERED) this.remembered.delete(this.remembered.keys().next().value!);
    this.remembered.set(sessionId, { wireVersion, softwareVersion });
  }

  /** The version of a session this replica remembers, without reading anything. */
  known(sessionId: string): WireVersion | undefined {
    return this.remembered.get(sessionId)?.wireVersion;
  }

  async of(workerId: string, sessionId: string): Promise<WireVersion> {
    return (await this.software(workerId, sessionId)).wireVersion;
  }

  /** The session's wire and software versions; a session that is not current: v1, no version. */
  async software(workerId: string, sessionId: string): Promise<WorkerSoftware> {
    const known = this.remembered.get(sessionId);
    if (known !== undefined) return known;
    const worker = await this.sessions.findWorker(workerId);
    if (!worker || worker.session.sessionId !== sessionId) return NOT_CURRENT;
    this.remember(sessionId, worker.protocolVersion, worker.softwareVersion);
    return this.remembered.get(sessionId) ?? NOT_CURRENT;
  }
}
