// The panel's choice (web/src/panel.ts).
import { graphql } from 'relay-runtime';

export default graphql`
mutation PageViewMutation($view: ResourcePanelView!) { setResourcePanelView(view: $view) { id resourcePanelView } }
`;
