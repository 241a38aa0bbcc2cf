import { Controller, Get, Inject, Param, Req, Res } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiParam, ApiProduces, ApiTags } from '@nestjs/swagger';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { CONFIG } from '../core/core';
import type { ControlPlaneConfig } from '../config/config';
import { CONSOLE_TAG } from '../http/admin-docs';
import { RequireRole } from '../identity/api-key.guard';
import { ConsoleFiles } from './console-files';

/** What every console answer says to the browser (ADR 0052): only this origin's files, never framed. */
export const CONSOLE_HEADERS: Record<string, string> = {
  'content-security-policy':
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'",
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'x-content-type-options': 'nosniff',
  'cache-control': 'no-cache',
};

/** The web console's page and its two assets, from the files `npm run build` made (ADR 0052). */
@Controller()
@ApiTags(CONSOLE_TAG)
@RequireRole('public')
export class ConsolePagesController {
  private readonly files: ConsoleFiles;

  constructor(@Inject(CONFIG) config: ControlPlaneConfig) {
    this.files = ConsoleFiles.load(config.consoleDir);
  }

  @Get()
  @ApiOperation({ summary: 'The web console (no credentials to load it; it signs in with an API key)' })
  @ApiProduces('text/html')
  @ApiOkResponse({ description: 'the page; 503 when the console was not built', schema: { type: 'string' } })
  page(@Req() req: FastifyRequest, @Res() reply: FastifyReply) {
    return this.send('index.html', req, reply);
  }

  @Get('assets/:file')
  @ApiOperation({ summary: "The console's script and style sheet (gzip when accepted)" })
  @ApiParam({ name: 'file', schema: { type: 'string', enum: ['app.js', 'console.css'] } })
  @ApiProduces('text/javascript', 'text/css')
  @ApiOkResponse({ description: 'the file; 404 for any other name', schema: { type: 'string' } })
  asset(@Param('file') file: string, @Req() req: FastifyRequest, @Res() reply: FastifyReply) {
    return this.send(`assets/${file}`, req, reply);
  }

  private send(name: string, req: FastifyRequest, reply: FastifyReply) {
    reply.headers(CONSOLE_HEADERS);
    const file = this.files.get(name);
    if (!file) {
      const missing = this.files.missing();
      reply.code(missing ? 503 : 404).type('text/plain; charset=utf-8');
      return reply.send(
        missing ? `the web console is not built here: run npm run build (${missing})\n` : 'no such file\n',
      );
    }
    const gzip = /\bgzip\b/.test(String(req.headers['accept-encoding'] ?? ''));
    reply.type(file.type).header('vary', 'accept-encoding');
    if (gzip) reply.header('content-encoding', 'gzip');
    return reply.send(gzip ? file.gzip : file.body);
  }
}
