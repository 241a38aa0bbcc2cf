import { Module } from '@nestjs/common';
import { PlacementService } from './placement.service';

/** Placement rules applied to live candidates (R-PLC-1..3); no controllers. */
@Module({
  providers: [PlacementService],
  exports: [PlacementService],
})
export class PlacementModule {}
