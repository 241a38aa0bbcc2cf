import {
  Body,
  Controller,
  Delete,
  Get,
  Headers,
  HttpCode,
  Param,
  Post,
  Put,
  Query,
  Req,
  Res,
} from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { AdminRequest, RequireRole } from '../identity/api-key.guard';
import { RunsService } from './runs.service';
import { TasksService } from './tasks.service';

@Controller('api/v1/tasks')
export class TasksController {
  constructor(
    private readonly tasks: TasksService,
    private readonly runs: RunsService,
  ) {}

  @Post()
  @HttpCode(201)
  @RequireRole('admin')
  create(@Req() req: AdminRequest, @Body() body: unknown) {
    return this.tasks.create(req.apiKey!, body);
  }

  @Get()
  list(@Query() query: unknown) {
    return this.tasks.list(query);
  }

  @Get(':taskId')
  get(@Param('taskId') taskId: string) {
    return this.tasks.get(taskId);
  }

  @Put(':taskId')
  @RequireRole('admin')
  update(@Req() req: AdminRequest, @Param('taskId') taskId: string, @Body() body: unknown) {
    return this.tasks.update(req.apiKey!, taskId, body);
  }

  @Delete(':taskId')
  @RequireRole('admin')
  delete(@Req() req: AdminRequest, @Param('taskId') taskId: string) {
    return this.tasks.delete(req.apiKey!, taskId);
  }

  @Get(':taskId/revisions')
  revisions(@Param('taskId') taskId: string, @Query() query: unknown) {
    return this.tasks.revisions(taskId, query);
  }

  /** 201 with a new run; 200 with the first run when the Idempotency-Key was seen with the same body. */
  @Post(':taskId/runs')
  @RequireRole('admin')
  async trigger(
    @Req() req: AdminRequest,
    @Param('taskId') taskId: string,
    @Body() body: unknown,
    @Headers('idempotency-key') key: string | undefined,
    @Res({ passthrough: true }) reply: FastifyReply,
  ) {
    const result = await this.runs.trigger(req.apiKey!, taskId, body, key);
    void reply.status(result.created ? 201 : 200);
    return result;
  }
}

@Controller('api/v1/runs')
export class RunsController {
  constructor(private readonly runs: RunsService) {}

  @Get()
  list(@Query() query: unknown) {
    return this.runs.list(query);
  }

  @Get(':runId')
  get(@Param('runId') runId: string) {
    return this.runs.get(runId);
  }

  @Post(':runId/cancel')
  @HttpCode(200)
  @RequireRole('admin')
  cancel(@Req() req: AdminRequest, @Param('runId') runId: string) {
    return this.runs.cancel(req.apiKey!, runId);
  }
}
