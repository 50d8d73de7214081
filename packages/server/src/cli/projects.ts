/**
 * `countersign projects …`: project and key administration through the HTTP API with the
 * master key (so it works against any instance, local or remote):
 * `projects create --name N --class agent`, `projects keys <projectId>`,
 * `projects add-key <projectId> --class live`, `projects rotate-key <projectId> <keyId> [--class C] [--grace S]`,
 * `projects revoke-key <projectId> <keyId>`, `projects rotate-client-secret <projectId> [--grace S]`,
 * `projects embed-origins <projectId> [origin…]`.
 * Key text and client secrets are printed once, as the API returns them.
 */
import type { Command } from 'commander';
import { call, print, run, withConnection, type Connection } from './api.js';

/** Registers the `projects` command group. */
export function registerProjects(program: Command): void {
  const projects = program.command('projects').description('create projects and manage their keys (master key)');

  withConnection(projects.command('create').description('create a project and its first key'))
    .requiredOption('--name <name>', 'project name')
    .option('--class <class>', 'credential class of the first key: human|agent|service|live', 'agent')
    .option('--label <label>', 'label of the key')
    .action((o: Connection & { name: string; class: string; label?: string }) =>
      run(async () => {
        const a = await call(o, 'POST', '/v1/projects', {
          name: o.name,
          credentialClass: o.class,
          ...(o.label ? { credentialLabel: o.label } : {}),
        });
        const p = a.project as Record<string, string>;
        print(o, a, () => [
          `project       ${p.id}`,
          `apiKey        ${p.apiKey}   (shown once)`,
          `class         ${p.credentialClass}  prefix ${p.apiKeyPrefix}  keyId ${p.keyId}`,
          `clientSecret  ${p.clientSecret}   (shown once; signs embed tokens)`,
        ]);
      }),
    );

  withConnection(projects.command('keys <projectId>').description("list a project's keys (no secrets)")).action(
    (projectId: string, o: Connection) =>
      run(async () => {
        const a = await call(o, 'GET', `/v1/projects/${encodeURIComponent(projectId)}/keys`);
        const keys = a.keys as Array<Record<string, string | null>>;
        print(o, a, () => keys.map((k) => `${k.id}  ${k.status}  ${k.credentialClass}  ${k.apiKeyPrefix}  ${k.label ?? ''}`));
      }),
  );

  withConnection(projects.command('add-key <projectId>').description('add a key to a project'))
    .requiredOption('--class <class>', 'human|agent|service|live')
    .option('--label <label>', 'label of the key')
    .action((projectId: string, o: Connection & { class: string; label?: string }) =>
      run(async () => {
        const a = await call(o, 'POST', `/v1/projects/${encodeURIComponent(projectId)}/keys`, {
          credentialClass: o.class,
          ...(o.label ? { credentialLabel: o.label } : {}),
        });
        const k = a.key as Record<string, string>;
        print(o, a, () => [`${k.id}  ${k.credentialClass}  ${k.apiKey}   (shown once)`]);
      }),
    );

  withConnection(
    projects.command('rotate-key <projectId> <keyId>').description('replace a key; the old one stops working at once, or after --grace'),
  )
    .option('--class <class>', 'class of the new key (default: the old class)')
    .option('--grace <seconds>', 'the old key keeps working this many seconds (default 0, at most 2592000)')
    .action((projectId: string, keyId: string, o: Connection & { class?: string; grace?: string }) =>
      run(async () => {
        const grace = o.grace === undefined ? undefined : Number(o.grace);
        if (grace !== undefined && !Number.isInteger(grace)) throw new Error('--grace must be a whole number of seconds');
        const a = await call(o, 'POST', `/v1/projects/${encodeURIComponent(projectId)}/keys/${encodeURIComponent(keyId)}/rotate`, {
          ...(o.class ? { credentialClass: o.class } : {}),
          ...(grace !== undefined ? { graceSeconds: grace } : {}),
        });
        const k = a.key as Record<string, string>;
        const old = grace ? `${keyId} works until ${String(a.oldKeyRevokedAt)}` : `${keyId} is revoked`;
        print(o, a, () => [`${k.id}  ${k.credentialClass}  ${k.apiKey}   (shown once; ${old})`]);
      }),
    );

  withConnection(
    projects
      .command('rotate-client-secret <projectId>')
      .description('replace the client secret that signs embed tokens; tokens signed with the old one stop at once, or after --grace'),
  )
    .option('--grace <seconds>', 'tokens signed with the old secret keep working this many seconds (default 0, at most 2592000)')
    .option('--grace-seconds <seconds>', 'the same as --grace')
    .action((projectId: string, o: Connection & { grace?: string; graceSeconds?: string }) =>
      run(async () => {
        const text = o.grace ?? o.graceSeconds;
        const grace = text === undefined ? undefined : Number(text);
        if (grace !== undefined && (!Number.isInteger(grace) || grace < 0)) throw new Error('--grace must be a whole number of seconds');
        const a = await call(
          o,
          'POST',
          `/v1/projects/${encodeURIComponent(projectId)}/client-secret/rotate`,
          grace !== undefined ? { graceSeconds: grace } : {},
        );
        const old = grace
          ? `tokens signed with the old secret work until ${String(a.oldSecretRevokedAt)}`
          : 'the old secret no longer works';
        print(o, a, () => [`clientSecret  ${String(a.clientSecret)}   (shown once; ${old})`]);
      }),
    );

  withConnection(
    projects
      .command('embed-origins <projectId> [origins...]')
      .description('set the origins allowed to frame /embed and to read with embed tokens (CORS); none clears them'),
  ).action((projectId: string, origins: string[], o: Connection) =>
    run(async () => {
      const a = await call(o, 'PATCH', `/v1/projects/${encodeURIComponent(projectId)}`, {
        embedOrigins: origins.length > 0 ? origins : null,
      });
      const set = ((a.project as { embedOrigins?: string[] } | undefined)?.embedOrigins ?? []).join(' ');
      print(o, a, () => [set === '' ? 'no embedding origins' : `embedding origins: ${set}`]);
    }),
  );

  withConnection(projects.command('revoke-key <projectId> <keyId>').description('revoke a key at once')).action(
    (projectId: string, keyId: string, o: Connection) =>
      run(async () => {
        const a = await call(o, 'DELETE', `/v1/projects/${encodeURIComponent(projectId)}/keys/${encodeURIComponent(keyId)}`);
        print(o, a, () => [`${keyId} revoked`]);
      }),
  );
}
