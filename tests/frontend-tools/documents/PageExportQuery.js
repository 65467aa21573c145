// The CSV link (web/src/page.ts).
import { graphql } from 'relay-runtime';

export default graphql`
query PageExportQuery($p: ID!, $scope: SessionScope, $filter: SessionFilter, $order: [SessionOrder!],
  $columns: [SessionColumnKey!]) {
  sessionExportUrl(projectId: $p, scope: $scope, filter: $filter, orderBy: $order, columns: $columns) }
`;
