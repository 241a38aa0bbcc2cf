import {
  Body,
  Controller,
  Delete,
  Get,
  Headers,
  HttpCode,
  Param,
  Patch,
  Post,
  Put,
  Query,
  Req,
  Res,
} from '@nestjs/common';
import {
  ApiCreatedResponse,
  ApiHeader,
  ApiOkResponse,
  ApiOperation,
  ApiParam,
  ApiResponse,
} from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { RUN_STATUSES, UUID_V7_PATTERN, WORKER_ID_PATTERN } from '@ql/domain';
import { AdminController, IntegerQuery, LimitQuery, TextQuery } from '../http/admin-docs';
import { AdminErrorResponses } from '../http/error-responses';
import { AdminRequest, RequireRole } from '../identity/api-key.guard';
import {
  DeletedTaskDto,
  LogPageDto,
  RunDetailDto,
  RunDto,
  RunPageDto,
  TaskDto,
  TaskPageDto,
  TaskRevisionPageDto,
  TriggeredRunDto,
  UpdatedTaskDto,
} from './dto/run-views.dto';
import { TaskSpecDto } from './dto/task-spec.dto';
import { TaskStateDto } from './dto/task-state.dto';
import { TaskBulkAnswerDto, TaskBulkDto } from './dto/task-bulk.dto';
import { TaskBulkService } from './task-bulk.service';
import { TriggerRunDto } from './dto/trigger-run.dto';
import { whileClientWaits } from '../http/client-gone';
import { IDEMPOTENCY_KEY_PATTERN } from './resource-ids';
import { LOG_POSITION_MAX, LOG_WAIT_MAX_SECONDS, RunsService } from './runs.service';
import { REVISION_MAX, TasksService } from './tasks.service';

const uuidV7 = { type: 'string', pattern: UUID_V7_PATTERN.source } as const;
const TaskIdParam = () => ApiParam({ name: 'taskId', schema: uuidV7 });
const RunIdParam = () => ApiParam({ name: 'runId', schema: uuidV7 });
const BAD_BODY = 'the body breaks a rule; nothing was written';

@Controller('api/v1/tasks')
@AdminController()
export class TasksController {
  constructor(
    private readonly tasks: TasksService,
    private readonly runs: RunsService,
    private readonly bulkActions: TaskBulkService,
  ) {}

  @Post()
  @HttpCode(201)
  @RequireRole('admin')
  @ApiOperation({ summary: 'Create a task at revision 1 (admin)' })
  @ApiCreatedResponse({ type: TaskDto })
  @AdminErrorResponses({ 400: BAD_BODY, 409: 'a live task has this name', 413: 'over the admin body limit' })
  create(@Req() req: AdminRequest, @Body() body: TaskSpecDto) {
    return this.tasks.create(req.apiKey!, body);
  }

  @Post('bulk')
  @HttpCode(200)
  @RequireRole('admin')
  @ApiOperation({
    summary:
      'One action (run, enable, disable, pin, unpin, delete) on up to 200 tasks, each on its own: a refusal of one is its result (admin)',
  })
  @ApiHeader({
    name: 'Idempotency-Key',
    required: false,
    schema: { type: 'string', pattern: IDEMPOTENCY_KEY_PATTERN.source },
    description: '`run`: the same key again returns the same runs',
  })
  @ApiOkResponse({ type: TaskBulkAnswerDto })
  @AdminErrorResponses({ 400: BAD_BODY })
  bulk(
    @Req() req: AdminRequest,
    @Body() body: TaskBulkDto,
    @Headers('idempotency-key') idempotencyKey: string | undefined,
  ) {
    return this.bulkActions.apply(req.apiKey!, body, idempotencyKey);
  }

  @Get()
  @ApiOperation({
    summary:
      'List live tasks, pinned first, then oldest first (keyset on the last task id); filters combine with AND',
  })
  @TextQuery('q', 'part of the name or the command; letters match in any case (Unicode, NFKC)')
  @TextQuery('enabled', 'only enabled (true) or disabled (false) tasks', {
    type: 'string',
    enum: ['true', 'false'],
  })
  @TextQuery('lastStatus', 'only tasks whose newest run has this status', {
    type: 'string',
    enum: RUN_STATUSES,
  })
  @TextQuery('after', 'task id to continue after (nextAfter)', uuidV7)
  @LimitQuery()
  @ApiOkResponse({ type: TaskPageDto })
  list(@Query() query: unknown) {
    return this.tasks.list(query);
  }

  @Get(':taskId')
  @ApiOperation({ summary: 'Task detail: current revision, digest and spec' })
  @TaskIdParam()
  @ApiOkResponse({ type: TaskDto })
  get(@Param('taskId') taskId: string) {
    return this.tasks.get(taskId);
  }

  @Patch(':taskId')
  @RequireRole('admin')
  @ApiOperation({ summary: 'Enable, disable, pin or unpin a task: its state, never a new revision (admin)' })
  @TaskIdParam()
  @ApiOkResponse({ type: TaskDto })
  @AdminErrorResponses({ 400: BAD_BODY, 404: 'no such task' })
  setState(@Req() req: AdminRequest, @Param('taskId') taskId: string, @Body() body: TaskStateDto) {
    return this.tasks.setState(req.apiKey!, taskId, body);
  }

  @Put(':taskId')
  @RequireRole('admin')
  @ApiOperation({
    summary: 'Replace the task spec; a new immutable revision only when the content changes (admin)',
  })
  @TaskIdParam()
  @ApiOkResponse({ type: UpdatedTaskDto })
  @AdminErrorResponses({ 400: BAD_BODY, 404: 'no such task', 409: 'another live task has this name' })
  update(@Req() req: AdminRequest, @Param('taskId') taskId: string, @Body() body: TaskSpecDto) {
    return this.tasks.update(req.apiKey!, taskId, body);
  }

  @Delete(':taskId')
  @RequireRole('admin')
  @ApiOperation({ summary: 'Delete a task: runs keep their pinned revisions, cron stops (admin)' })
  @TaskIdParam()
  @ApiOkResponse({ type: DeletedTaskDto })
  @AdminErrorResponses({ 404: 'no such task' })
  delete(@Req() req: AdminRequest, @Param('taskId') taskId: string) {
    return this.tasks.delete(req.apiKey!, taskId);
  }

  @Get(':taskId/revisions')
  @ApiOperation({ summary: 'Immutable revisions of a task, newest first (keyset pagination on revision)' })
  @TaskIdParam()
  @IntegerQuery('before', 1, REVISION_MAX, 'revision to continue before (nextBefore)')
  @LimitQuery()
  @ApiOkResponse({ type: TaskRevisionPageDto })
  revisions(@Param('taskId') taskId: string, @Query() query: unknown) {
    return this.tasks.revisions(taskId, query);
  }

  /** 201 with a new run; 200 with the first run when the Idempotency-Key was seen with the same body. */
  @Post(':taskId/runs')
  @RequireRole('admin')
  @ApiOperation({ summary: "Trigger a run pinned to the task's current revision (admin)" })
  @TaskIdParam()
  @ApiHeader({
    name: 'Idempotency-Key',
    required: false,
    schema: { type: 'string', pattern: IDEMPOTENCY_KEY_PATTERN.source },
    description:
      'the same key with the same body returns the first run (200); with another body it is 409 `conflict`',
  })
  @ApiCreatedResponse({ type: TriggeredRunDto, description: 'a new run' })
  @ApiResponse({
    status: 200,
    type: TriggeredRunDto,
    description: 'replay of the Idempotency-Key: the first run',
  })
  @AdminErrorResponses({
    400: BAD_BODY,
    404: 'no such task',
    409: 'the Idempotency-Key was used for another request',
  })
  async trigger(
    @Req() req: AdminRequest,
    @Param('taskId') taskId: string,
    @Body() body: TriggerRunDto,
    @Headers('idempotency-key') key: string | undefined,
    @Res({ passthrough: true }) reply: FastifyReply,
  ) {
    const result = await this.runs.trigger(req.apiKey!, taskId, body, key);
    void reply.status(result.created ? 201 : 200);
    return result;
  }
}

@Controller('api/v1/runs')
@AdminController()
export class RunsController {
  constructor(private readonly runs: RunsService) {}

  @Get()
  @ApiOperation({ summary: 'List runs, newest first (keyset pagination on run id)' })
  @TextQuery('status', 'only runs in this status', { type: 'string', enum: RUN_STATUSES })
  @TextQuery('taskId', 'only runs of this task', uuidV7)
  @TextQuery(
    'workerId',
    'only runs with an attempt on this worker: any attempt, not only the current one (a run retried elsewhere stays in the list of each worker it ran on); a deleted worker keeps its runs, an id no worker had lists none; a malformed id is 400 `invalid_worker_id`',
    { type: 'string', pattern: WORKER_ID_PATTERN.source },
  )
  @TextQuery('before', 'run id to continue before (nextBefore)', uuidV7)
  @LimitQuery()
  @ApiOkResponse({ type: RunPageDto })
  list(@Query() query: unknown) {
    return this.runs.list(query);
  }

  @Get(':runId')
  @ApiOperation({ summary: 'Run detail: attempts, events, placement and why it is pending' })
  @RunIdParam()
  @ApiOkResponse({ type: RunDetailDto })
  get(@Param('runId') runId: string) {
    return this.runs.get(runId);
  }

  @Get(':runId/logs')
  @ApiOperation({
    summary:
      "A page of the run's output by position; tail with ?after=nextAfter&wait=20 (long poll) until runEnded and an empty page",
  })
  @RunIdParam()
  @IntegerQuery('after', 0, LOG_POSITION_MAX, 'position to continue after (nextAfter)', 0)
  @LimitQuery()
  @IntegerQuery(
    'wait',
    0,
    LOG_WAIT_MAX_SECONDS,
    'seconds to hold an empty page of a live run until output or its end is stored (long poll)',
    0,
  )
  @TextQuery(
    'view',
    '`text` (default): every control and format character shown as a visible escape (`\\u001b`); `ansi`: the same, but whole ANSI colour sequences (SGR, `ESC[…m`) within one chunk are kept for a renderer of colours',
    { type: 'string', enum: ['text', 'ansi'], default: 'text' },
  )
  @ApiOkResponse({ type: LogPageDto })
  @AdminErrorResponses({ 404: 'no such run' })
  logs(
    @Param('runId') runId: string,
    @Query() query: unknown,
    @Res({ passthrough: true }) reply: FastifyReply,
  ) {
    return whileClientWaits(reply, (gone) => this.runs.logs(runId, query, gone));
  }

  @Post(':runId/cancel')
  @HttpCode(200)
  @RequireRole('admin')
  @ApiOperation({
    summary:
      'Request cancellation: persisted first; a queued or retry_wait run is cancelled at once, a held one is told through its lease (admin)',
  })
  @RunIdParam()
  @ApiOkResponse({ type: RunDto })
  @AdminErrorResponses({ 404: 'no such run', 409: 'the run has already finished' })
  cancel(@Req() req: AdminRequest, @Param('runId') runId: string) {
    return this.runs.cancel(req.apiKey!, runId);
  }
}
