// The detail's log (web/src/detail.ts).
import { graphql } from 'relay-runtime';

export default graphql`
subscription PageLogsSubscription($id: ID!) { sessionLogs(sessionId: $id, tail: 200) }
`;
