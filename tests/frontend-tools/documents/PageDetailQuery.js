// The detail panel (web/src/detail.ts).
import { graphql } from 'relay-runtime';

export default graphql`
query PageDetailQuery($id: ID!) { session(id: $id) { id name status type statusInfo queuePosition
  pull { percent bytesDone bytesTotal layersDone layersTotal } pendingReasons { message } mounts { path readOnly folder { id name } }
  apps { name url opens status statusInfo }
  statusTransitions { fromStatus toStatus occurredAt reason }
  schedulingHistory(first: 50) { edges { node { id phase result message attempts createdAt lastTriedAt } } } } }
`;
