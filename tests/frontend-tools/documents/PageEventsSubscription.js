// The list's live feed (web/src/page.ts).
import { graphql } from 'relay-runtime';

export default graphql`
subscription PageEventsSubscription($p: ID!, $scope: SessionScope, $after: String) {
  sessionEvents(projectId: $p, scope: $scope, after: $after) {
    cursor kind sessionId toStatus session { id name statusInfo pull { percent } }
  }
}
`;
