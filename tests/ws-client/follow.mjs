// Follows sessionEvents with the reference graphql-transport-ws client (npm graphql-ws),
// printing one JSON line per event, until the session ends (TERMINATED, CANCELLED or ERROR).
//
//   node follow.mjs <ws-url> <token> <project-id> <after-cursor>
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';

const [url, token, projectId, after] = process.argv.slice(2);
const client = createClient({
  url,
  webSocketImpl: WebSocket,
  connectionParams: { authorization: `Bearer ${token}` },
  retryAttempts: 0,
});
const query = `subscription($p: ID!, $after: String) {
  sessionEvents(projectId: $p, after: $after) { cursor sessionId fromStatus toStatus session { name status } }
}`;
const giveUp = setTimeout(() => {
  console.error('no end within 60 s');
  process.exit(2);
}, 60_000);
client.subscribe(
  { query, variables: { p: projectId, after } },
  {
    next: (result) => {
      if (result.errors) {
        console.error(JSON.stringify(result.errors));
        process.exit(3);
      }
      const event = result.data.sessionEvents;
      console.log(JSON.stringify(event));
      if (['TERMINATED', 'CANCELLED', 'ERROR'].includes(event.toStatus)) {
        clearTimeout(giveUp);
        process.exit(0); // stdout to a pipe is synchronous on Linux: the line is out
      }
    },
    error: (err) => {
      console.error(JSON.stringify(err, Object.getOwnPropertyNames(err)));
      process.exit(4);
    },
    complete: () => process.exit(0),
  },
);
