// Runs graphql-http's server audits (GraphQL over HTTP conformance) against a sessiond URL
// and prints one JSON line per audit: {id, name, status, reason}.
// Usage: node audit.mjs <http://host:port/graphql> <token>
import { auditServer } from 'graphql-http';

const [url, token] = process.argv.slice(2);
// Every request carries the caller's token: sessiond answers no GraphQL request without one.
const fetchFn = (input, init = {}) => {
  const headers = new Headers(init.headers);
  headers.set('authorization', `Bearer ${token}`);
  return fetch(input, { ...init, headers });
};
const results = await auditServer({ url, fetchFn });
for (const r of results) {
  console.log(JSON.stringify({ id: r.id, name: r.name, status: r.status, reason: r.reason ?? null }));
}
