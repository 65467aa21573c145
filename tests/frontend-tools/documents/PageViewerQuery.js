// The page's viewer (web/src/page.ts), with the ids a normalised cache keys on.
import { graphql } from 'relay-runtime';

export default graphql`
query PageViewerQuery {
  viewer {
    user { id email fullName role }
    projects { id name sessionScopes }
    settings {
      id resourcePanelView sessionListColumns { column visible }
      everyone: sessionListColumns(scope: PROJECT) { column visible }
    }
  }
}
`;
