// One GraphQL request to the server at `base` with `token`, outside the browser (what the
// browser scripts do behind the page's back: launch, terminate, read what the API says).
export async function api(base, token, query, variables = {}) {
  const r = await fetch(new URL('/graphql', base), {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ query, variables }),
  });
  const body = await r.json();
  if (body.errors) throw new Error(JSON.stringify(body.errors));
  return body.data;
}
