import { Module } from '@nestjs/common';

/**
 * Activation, completion and logs on the ingress listener (R-ACT-1..3, R-CMP-1..2): `starting`,
 * `running`, `start-failure`, `completion`, `logs`. Empty until those actions land; it is already part
 * of the ingress listener's module graph so they arrive in their own module.
 */
@Module({})
export class ActivationModule {}
