// Terminate the selection (web/src/page.ts), with the sessions after it.
import { graphql } from 'relay-runtime';

export default graphql`
mutation PageTerminateMutation($ids: [ID!]!) {
  terminateSessions(ids: $ids) { results { sessionId outcome session { id name status } } } }
`;
