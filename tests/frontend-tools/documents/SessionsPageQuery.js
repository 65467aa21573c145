// The page's list and its tabs' counts (web/src/page.ts).
import { graphql } from 'relay-runtime';

export default graphql`
query SessionsPageQuery($p: ID!, $scope: SessionScope, $filter: SessionFilter, $counted: SessionFilter,
  $order: [SessionOrder!], $first: Int, $after: String, $last: Int, $before: String) {
  sessions(projectId: $p, scope: $scope, filter: $filter, orderBy: $order, first: $first, after: $after, last: $last, before: $before) {
    pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
    edges { node { id name status type createdAt startedAt terminatedAt elapsedSeconds clusterSize priority
      queuePosition result statusInfo pull { percent } agent owner { email } project { name } resourceGroup { name } image { name webApps }
      requestedSlots { cpu memory accelerators { slot amount } } occupiedSlots { cpu memory accelerators { slot amount } }
      pendingReasons { code message } statusChangedBy { kind rule user { email } } expiry { at reason }
      utilization { slot current } mounts { path readOnly } launchedFrom { kind originId name } } }
  }
  sessionCounts(projectId: $p, scope: $scope, filter: $counted) { running finished }
}
`;
