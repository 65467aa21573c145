// The launcher's catalog (web/src/launcher.ts).
import { graphql } from 'relay-runtime';

export default graphql`
query PageCatalogQuery($p: ID!) { images { name supportedTypes }
  resourceGroups(projectId: $p) { name allowedSessionTypes }
  resourcePanel(projectId: $p, view: MY_TOTAL) { slots { slot } } }
`;
