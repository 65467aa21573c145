// The table's columns (web/src/page.ts).
import { graphql } from 'relay-runtime';

export default graphql`
mutation PageColumnsMutation($columns: [SessionColumnInput!]!) {
  updateSessionListColumns(columns: $columns) { id resourcePanelView sessionListColumns { column visible }
    everyone: sessionListColumns(scope: PROJECT) { column visible } } }
`;
