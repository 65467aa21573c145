// Launch one (web/src/launcher.ts).
import { graphql } from 'relay-runtime';

export default graphql`
mutation PageLaunchOneMutation($input: LaunchSessionInput!) { launchSession(input: $input) { session { id name status } } }
`;
