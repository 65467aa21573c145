// The launcher's dry run (web/src/launcher.ts).
import { graphql } from 'relay-runtime';

export default graphql`
query PageCheckQuery($count: Int, $input: LaunchSessionInput!) { checkLaunch(count: $count, input: $input) {
  valid fitsNow problems { code field message } pendingReasons { code message } } }
`;
