// Frontend teams' own tools on sessiond, as they would use them: relay-compiler compiles the
// page's documents (kept in `documents/`) against the schema with `nonNodeIdFields` strict, a
// relay-runtime store and Apollo Client's normalised cache follow a session through a rename
// and a terminate and the settings through their mutations, Apollo's persisted-query link
// falls back and then sends hashes alone, and `nodes(ids:)` finds every record again.
//
// Usage: node run.mjs <schema.graphql> <http://host:port/graphql> <token> <project id>
// Prints one JSON line of what it saw; the Rust test asserts on it. Exits non-zero when a
// tool fails outright.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { ApolloClient, ApolloLink, HttpLink, InMemoryCache, gql } from '@apollo/client';
import { PersistedQueryLink } from '@apollo/client/link/persisted-queries';
import relay from 'relay-runtime';

const [schema, url, token, project] = process.argv.slice(2);
const here = path.dirname(fileURLToPath(import.meta.url));
const seen = {};

// relay-compiler, in a directory of its own (inside this package, so that the artifacts find
// relay-runtime), removed at the end.
const work = fs.mkdtempSync(path.join(here, 'tmp-'));
try {
  fs.cpSync(path.join(here, 'documents'), path.join(work, 'documents'), {
    recursive: true,
    filter: (p) => !p.includes('__generated__'),
  });
  fs.mkdirSync(path.join(work, 'documents', '__generated__'));
  // The artifacts are CommonJS modules.
  fs.writeFileSync(path.join(work, 'documents', '__generated__', 'package.json'), '{"type": "commonjs"}');
  const config = JSON.parse(fs.readFileSync(path.join(here, 'relay.config.json'), 'utf8'));
  config.schema = path.resolve(schema);
  fs.writeFileSync(path.join(work, 'relay.config.json'), JSON.stringify(config));
  const compiler = path.join(here, 'node_modules', '.bin', 'relay-compiler');
  const compiled = spawnSync(compiler, [path.join(work, 'relay.config.json')], { cwd: work, encoding: 'utf8' });
  seen.relayCompiler = { ok: compiled.status === 0, output: `${compiled.stdout}${compiled.stderr}`.slice(-4000) };
  if (compiled.status === 0) {
    const artifacts = fs.readdirSync(path.join(work, 'documents', '__generated__'));
    seen.relayCompiler.artifacts = artifacts.filter((f) => f.endsWith('.graphql.js')).length;
    const require = createRequire(path.join(work, 'documents', '__generated__', 'x.js'));
    const artifact = (name) => require(`./${name}.graphql.js`);
    seen.relay = await relayStore(artifact);
  }
  seen.apollo = await apollo();
} finally {
  fs.rmSync(work, { recursive: true, force: true });
}
console.log(JSON.stringify(seen));

/** One POST to the server, as both clients send it. */
async function post(body) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify(body),
  });
  return res.json();
}

/** The text of a kept document (the `graphql` template of its module). */
function documentText(name) {
  const source = fs.readFileSync(path.join(here, 'documents', `${name}.js`), 'utf8');
  return source.slice(source.indexOf('graphql`') + 'graphql`'.length, source.lastIndexOf('`'));
}

function launchInput(name) {
  return {
    projectId: project,
    name,
    image: 'python:3.12',
    resources: [
      { slot: 'cpu', amount: 1 },
      { slot: 'mem', amount: 1073741824 },
    ],
  };
}

/** A relay-runtime store fed by the server: what a Relay page holds after each request. */
async function relayStore(artifact) {
  const { Environment, Network, RecordSource, Store, commitMutation, fetchQuery, createOperationDescriptor } = relay;
  const network = Network.create((params, variables) => post({ query: params.text, variables }));
  const environment = new Environment({ network, store: new Store(new RecordSource()) });
  const run = (name, variables) => fetchQuery(environment, artifact(name), variables).toPromise();
  const mutate = (name, variables) =>
    new Promise((resolve, reject) =>
      commitMutation(environment, {
        mutation: artifact(name),
        variables,
        onCompleted: (response, errors) => (errors ? reject(new Error(JSON.stringify(errors))) : resolve(response)),
        onError: reject,
      }),
    );
  const read = (name, variables) =>
    environment.lookup(createOperationDescriptor(artifact(name), variables).fragment).data;
  const out = {};

  const launched = await mutate('PageLaunchOneMutation', { input: launchInput('relay-one') });
  const id = launched.launchSession.session.id;
  const list = { p: project, first: 50 };
  await run('SessionsPageQuery', list);
  await run('PageDetailQuery', { id });
  await mutate('PageModifyMutation', { ids: [id], input: { name: 'relay-renamed' } });
  const terminated = await mutate('PageTerminateMutation', { ids: [id] });
  out.terminateOutcome = terminated.terminateSessions.results[0].outcome;
  out.terminateSessionId = terminated.terminateSessions.results[0].sessionId === id;

  const record = environment.getStore().getSource().get(id);
  out.recordTypename = record?.__typename ?? null;
  const listed = read('SessionsPageQuery', list).sessions.edges.map((e) => e.node).find((n) => n.id === id);
  out.listed = listed ? { name: listed.name, status: listed.status } : null;
  const detail = read('PageDetailQuery', { id }).session;
  out.detail = detail ? { name: detail.name, status: detail.status } : null;

  // The settings follow their mutations by their id.
  const viewer = await run('PageViewerQuery', {});
  const before = viewer.viewer.settings.resourcePanelView;
  const other = before === 'MY_TOTAL' ? 'TOTAL_IN_RESOURCE_GROUP' : 'MY_TOTAL';
  await mutate('PageViewMutation', { view: other });
  out.settingsFollow = read('PageViewerQuery', {}).viewer.settings.resourcePanelView === other;
  await mutate('PageViewMutation', { view: before });

  // Every id found again by `nodes`, each as what it is.
  const entry = detail ? (await run('PageDetailQuery', { id })).session.schedulingHistory.edges[0]?.node.id : null;
  const ids = [id, viewer.viewer.settings.id, entry, viewer.viewer.user.id, 'bm9wZQ'].filter(Boolean);
  const nodes = await run('PageNodesQuery', { ids });
  out.nodes = nodes.nodes.map((n) => (n ? n.__typename : null));
  return out;
}

/** Apollo Client 4: a normalised cache over a persisted-query link over HTTP. */
async function apollo() {
  const sent = [];
  const recording = async (uri, options) => {
    const body = JSON.parse(options.body);
    const res = await fetch(uri, options);
    const text = await res.text();
    const answer = JSON.parse(text);
    sent.push({
      query: typeof body.query === 'string',
      hash: Boolean(body.extensions?.persistedQuery?.sha256Hash),
      code: answer.errors?.[0]?.extensions?.code ?? null,
    });
    return new Response(text, { status: res.status, headers: res.headers });
  };
  const sha256 = (text) => createHash('sha256').update(text).digest('hex');
  const link = ApolloLink.from([
    new PersistedQueryLink({ sha256 }),
    new HttpLink({ uri: url, headers: { authorization: `Bearer ${token}` }, fetch: recording }),
  ]);
  const client = new ApolloClient({ cache: new InMemoryCache(), link });
  const out = {};
  const list = { p: project, first: 50 };
  const LIST = gql(documentText('SessionsPageQuery'));
  const VIEWER = gql(documentText('PageViewerQuery'));

  const launched = await client.mutate({
    mutation: gql(documentText('PageLaunchOneMutation')),
    variables: { input: launchInput('apollo-one') },
  });
  const id = launched.data.launchSession.session.id;
  const mark = sent.length;
  await client.query({ query: LIST, variables: list, fetchPolicy: 'network-only' });
  await client.query({ query: LIST, variables: list, fetchPolicy: 'network-only' });
  // Hash alone, not found; the document with its hash; then the hash alone, answered.
  out.persisted = sent.slice(mark);

  await client.mutate({
    mutation: gql(documentText('PageModifyMutation')),
    variables: { ids: [id], input: { name: 'apollo-renamed' } },
  });
  await client.mutate({ mutation: gql(documentText('PageTerminateMutation')), variables: { ids: [id] } });
  const cached = client.readQuery({ query: LIST, variables: list });
  const node = cached.sessions.edges.map((e) => e.node).find((n) => n.id === id);
  out.listed = node ? { name: node.name, status: node.status } : null;
  out.resultKeys = Object.keys(client.cache.extract()).filter((k) => /Result/.test(k));

  const viewer = await client.query({ query: VIEWER, fetchPolicy: 'network-only' });
  const before = viewer.data.viewer.settings.resourcePanelView;
  const other = before === 'MY_TOTAL' ? 'TOTAL_IN_RESOURCE_GROUP' : 'MY_TOTAL';
  await client.mutate({ mutation: gql(documentText('PageViewMutation')), variables: { view: other } });
  out.settingsFollow = client.readQuery({ query: VIEWER }).viewer.settings.resourcePanelView === other;
  await client.mutate({ mutation: gql(documentText('PageViewMutation')), variables: { view: before } });
  return out;
}
