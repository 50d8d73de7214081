/** Views as URLs (hash routes) and the embedded viewer's launch parameters. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readRoute, routeHash } from '../src/route.js';
import { embedLaunch, embedScope } from '../src/embed.js';

test('routes: stream filters, a trace with a node, an entry; the embed token is carried along', () => {
  const filters = new URLSearchParams([
    ['actorPrefix', 'onboard'],
    ['meta', 'env=prod'],
    ['meta', 'team=a'],
  ]);
  const h = routeHash({ view: 'stream', filters }, null);
  assert.equal(h, '#view=stream&actorPrefix=onboard&meta=env%3Dprod&meta=team%3Da');
  const back = readRoute(h);
  assert.equal(back.view, 'stream');
  assert.deepEqual(back.filters.getAll('meta'), ['env=prod', 'team=a']);
  const trace = routeHash({ view: 'trace', trace: 'run 1', entry: 'log_x', filters }, 'tok.en.x');
  assert.equal(trace, '#token=tok.en.x&view=trace&trace=run+1&entry=log_x', 'filters belong to the stream view only');
  const r = readRoute(trace);
  assert.deepEqual([r.view, r.trace, r.entry, r.filters.toString()], ['trace', 'run 1', 'log_x', '']);
  assert.equal(readRoute('#view=nonsense').view, 'stream');
  assert.equal(readRoute('').view, 'stream');
});

test('embed launch: /embed?project=…#token=…; missing parts say what is missing; scope read from the token', () => {
  assert.equal(embedLaunch({ pathname: '/', search: '', hash: '' }), undefined);
  assert.deepEqual(embedLaunch({ pathname: '/embed', search: '?project=prj_live_a', hash: '#token=a.b.c&view=trace' }), {
    projectId: 'prj_live_a',
    token: 'a.b.c',
  });
  assert.match((embedLaunch({ pathname: '/embed', search: '', hash: '#token=a.b.c' }) as { error: string }).error, /project/);
  // Bare /embed#token=: the project comes from the token's own claim.
  const withProject = btoa(JSON.stringify({ projectId: 'prj_live_b' })).replace(/=+$/, '');
  assert.deepEqual(embedLaunch({ pathname: '/embed', search: '', hash: `#token=e30.${withProject}.sig` }), {
    projectId: 'prj_live_b',
    token: `e30.${withProject}.sig`,
  });
  assert.match((embedLaunch({ pathname: '/embed', search: '?project=p', hash: '' }) as { error: string }).error, /token/);
  const claims = Buffer.from(JSON.stringify({ projectId: 'p', scope: { traceId: 'run-1' } })).toString('base64url');
  assert.deepEqual(embedScope(`e30.${claims}.sig`), { traceId: 'run-1' });
  assert.deepEqual(embedScope('garbage'), {});
});
