import {
  Body,
  Controller,
  Delete,
  Get,
  HttpCode,
  Inject,
  Param,
  Post,
  Query,
  Req,
  Res,
} from '@nestjs/common';
import {
  ApiCreatedResponse,
  ApiNoContentResponse,
  ApiOkResponse,
  ApiOperation,
  ApiParam,
} from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { UUID_V7_PATTERN } from '@ql/domain';
import { CONFIG } from '../core/core';
import type { ControlPlaneConfig } from '../config/config';
import { AdminController, LimitQuery, TextQuery } from '../http/admin-docs';
import { AdminErrorResponses } from '../http/error-responses';
import { AdminRequest, RequireRole } from '../identity/api-key.guard';
import { sessionCookie } from '../identity/console-session-tokens';
import { ConsoleSessionsService } from './console-sessions.service';
import {
  ConsoleSessionDto,
  ConsoleSessionPageDto,
  CurrentSessionDto,
  SignInDto,
} from './dto/console-session.dto';

const uuidV7 = { type: 'string', pattern: UUID_V7_PATTERN.source } as const;

/** `Secure` on the cookie: over TLS (`auto`), always (behind a TLS proxy), or never (ADR 0052). */
function secureCookie(config: ControlPlaneConfig, request: AdminRequest): boolean {
  return (
    config.consoleCookieSecure === 'always' ||
    (config.consoleCookieSecure === 'auto' && request.protocol === 'https')
  );
}

/** The browser's own session: sign in with a key, see it, sign out (ADR 0052). */
@Controller('api/v1/session')
@AdminController()
export class CurrentSessionController {
  constructor(
    private readonly sessions: ConsoleSessionsService,
    @Inject(CONFIG) private readonly config: ControlPlaneConfig,
  ) {}

  @Post()
  @HttpCode(201)
  @RequireRole('public')
  @ApiOperation({
    summary:
      'Sign in: exchange an API key for a console session; the answer sets an HttpOnly, SameSite=Strict cookie and carries the CSRF token for changes',
  })
  @ApiCreatedResponse({ type: CurrentSessionDto })
  @AdminErrorResponses({ 400: 'the body breaks a rule; nothing was written' })
  async signIn(
    @Req() req: AdminRequest,
    @Body() body: SignInDto,
    @Res({ passthrough: true }) reply: FastifyReply,
  ) {
    const { token, view } = await this.sessions.signIn(body.apiKey);
    reply.header('set-cookie', sessionCookie(token, secureCookie(this.config, req)));
    reply.header('cache-control', 'no-store');
    return view;
  }

  @Get()
  @ApiOperation({ summary: "The caller's console session, with its CSRF token (cookie only)" })
  @ApiOkResponse({ type: CurrentSessionDto })
  @AdminErrorResponses({ 404: 'the request carries no console session (an API key was used)' })
  current(@Req() req: AdminRequest, @Res({ passthrough: true }) reply: FastifyReply) {
    reply.header('cache-control', 'no-store');
    return this.sessions.current(req);
  }

  @Delete()
  @HttpCode(204)
  @ApiOperation({ summary: 'Sign out: the session ends on every replica at once and its cookie is cleared' })
  @ApiNoContentResponse({ description: 'signed out' })
  @AdminErrorResponses({ 404: 'the request carries no console session (an API key was used)' })
  async signOut(@Req() req: AdminRequest, @Res({ passthrough: true }) reply: FastifyReply) {
    await this.sessions.signOut(req);
    reply.header('set-cookie', sessionCookie(null, secureCookie(this.config, req)));
  }
}

/** Every console session, for admins: who is signed in, and ending one (ADR 0052). */
@Controller('api/v1/console-sessions')
@RequireRole('admin')
@AdminController()
export class ConsoleSessionsController {
  constructor(private readonly sessions: ConsoleSessionsService) {}

  @Get()
  @ApiOperation({ summary: 'List console sessions (keyset pagination on id), never their tokens (admin)' })
  @TextQuery('after', 'session id to continue after (nextAfter)', uuidV7)
  @LimitQuery()
  @ApiOkResponse({ type: ConsoleSessionPageDto })
  @AdminErrorResponses({ 400: 'a cursor or limit is malformed; `detail` names it' })
  list(@Query() query: unknown) {
    return this.sessions.list(query);
  }

  @Delete(':id')
  @ApiOperation({ summary: 'Revoke a console session: its next request is refused (admin)' })
  @ApiParam({ name: 'id', schema: uuidV7 })
  @ApiOkResponse({
    type: ConsoleSessionDto,
    description: 'the session, revoked (the first time, if revoked before)',
  })
  @AdminErrorResponses({ 400: 'the id is not a session id', 404: 'no such session' })
  revoke(@Req() req: AdminRequest, @Param('id') id: string) {
    return this.sessions.revoke(req.apiKey!, id);
  }
}
