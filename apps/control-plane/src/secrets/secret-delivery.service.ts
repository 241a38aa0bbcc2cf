import { Inject, Injectable, Logger } from '@nestjs/common';
import {
  RefusedError,
  SECRET_REPOSITORY,
  SecretKeyError,
  SecretRepository,
  UnavailableError,
} from '@ql/domain';
import { WorkerPrincipal } from '../identity/worker-principal';
import { leaseFenceCommand } from '../leases/lease-fence-command';

/**
 * The ingress side of secrets (ADR 0050): the fence is read from the body like every lease call's,
 * identity from the certificate; a value never reaches a log line (only names and ids do).
 */
@Injectable()
export class SecretDeliveryService {
  private readonly logger = new Logger('secrets');

  constructor(@Inject(SECRET_REPOSITORY) private readonly secrets: SecretRepository) {}

  async deliver(p: WorkerPrincipal, sessionId: string, body: unknown) {
    const command = leaseFenceCommand(p, sessionId, body);
    try {
      const delivery = await this.secrets.deliver(command);
      if (Object.keys(delivery.env).length > 0)
        this.logger.log({
          msg: 'secrets delivered',
          workerId: p.workerId,
          attemptId: delivery.attemptId,
          env: Object.keys(delivery.env),
        });
      return delivery;
    } catch (error) {
      const reason =
        error instanceof SecretKeyError
          ? error.reason
          : error instanceof UnavailableError &&
              (error.reason.startsWith('secret') || error.reason === 'cancel_requested')
            ? error.reason
            : undefined;
      if (reason === undefined) throw error;
      this.logger.warn({
        msg: 'secrets not delivered',
        workerId: p.workerId,
        offerId: command.offerId,
        reason,
      });
      throw new RefusedError('secrets_unavailable', (error as Error).message, reason);
    }
  }
}
