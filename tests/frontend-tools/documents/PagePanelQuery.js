// The resource panel (web/src/panel.ts).
import { graphql } from 'relay-runtime';

export default graphql`
query PagePanelQuery($p: ID!, $view: ResourcePanelView!) { resourcePanel(projectId: $p, view: $view) {
  view resourceGroup slots { slot used limit remaining bindingLayer layers { layer limit used remaining } } } }
`;
