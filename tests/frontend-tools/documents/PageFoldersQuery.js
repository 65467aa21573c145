// The folders dialog (web/src/folders.ts).
import { graphql } from 'relay-runtime';

export default graphql`
query PageFoldersQuery($p: ID!) { folders(projectId: $p) { id name scope access quotaBytes
  usage { bytes files } mountedBy { id name } } }
`;
