// Open an app (web/src/detail.ts).
import { graphql } from 'relay-runtime';

export default graphql`
mutation PageOpenAppMutation($id: ID!, $name: String!) { openSessionApp(sessionId: $id, name: $name) { url } }
`;
