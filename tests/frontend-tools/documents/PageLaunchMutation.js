// Launch several (web/src/launcher.ts).
import { graphql } from 'relay-runtime';

export default graphql`
mutation PageLaunchMutation($count: Int!, $input: LaunchSessionInput!) {
  launchSessions(count: $count, input: $input) { launchGroup { id } sessions { id name status } } }
`;
