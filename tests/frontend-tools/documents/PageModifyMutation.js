// Rename a session, with it after.
import { graphql } from 'relay-runtime';

export default graphql`
mutation PageModifyMutation($ids: [ID!]!, $input: ModifySessionInput!) {
  modifySessions(ids: $ids, input: $input) { results { sessionId outcome session { id name status } } } }
`;
