// Records found again by their global ids, as a normalised cache refetches them.
import { graphql } from 'relay-runtime';

export default graphql`
query PageNodesQuery($ids: [ID!]!) { nodes(ids: $ids) { __typename id
  ... on Session { name status }
  ... on SessionTemplate { name }
  ... on SchedulingHistoryEntry { phase }
  ... on Folder { name }
  ... on UserSettings { resourcePanelView } } }
`;
