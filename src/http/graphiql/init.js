// Starts GraphiQL against this server's /graphql, sending the bearer token typed above.
// Subscriptions go over /graphql/ws with the graphql-ws client (graphql-transport-ws).
(function () {
  'use strict';
  var STORAGE_KEY = 'sessiond.token';
  var form = document.getElementById('token-bar');
  var input = document.getElementById('token');
  input.value = window.sessionStorage.getItem(STORAGE_KEY) || '';
  var root = ReactDOM.createRoot(document.getElementById('graphiql'));

  var wsClient = null;

  // Whether the operation GraphiQL runs is a subscription.
  function isSubscription(params) {
    var query = (params.query || '').replace(/#[^\n]*/g, '');
    if (params.operationName) {
      return new RegExp('\\bsubscription\\s+' + params.operationName + '\\b').test(query);
    }
    return /^\s*subscription\b/.test(query);
  }

  function makeFetcher(token) {
    if (wsClient) wsClient.dispose();
    var scheme = window.location.protocol === 'https:' ? 'wss://' : 'ws://';
    wsClient = graphqlWs.createClient({
      url: scheme + window.location.host + '/graphql/ws',
      connectionParams: token ? { authorization: 'Bearer ' + token } : {},
      lazy: true
    });
    return function (params) {
      if (isSubscription(params)) {
        return wsClient.iterate(params);
      }
      var headers = {
        'Content-Type': 'application/json',
        Accept: 'application/graphql-response+json, application/json'
      };
      if (token) headers.Authorization = 'Bearer ' + token;
      return fetch('/graphql', { method: 'POST', headers: headers, body: JSON.stringify(params) })
        .then(function (res) { return res.json(); });
    };
  }

  function render() {
    var token = input.value.trim();
    root.render(React.createElement(GraphiQL, {
      fetcher: makeFetcher(token),
      defaultQuery: '# Put a token above (the demo has demo-alice, demo-bob, demo-admin, demo-root, demo-carol).\n' +
        '{\n  viewer {\n    user { email role }\n    projects { id name }\n    settings { resourcePanelView }\n  }\n}\n'
    }));
  }

  form.addEventListener('submit', function (event) {
    event.preventDefault();
    window.sessionStorage.setItem(STORAGE_KEY, input.value.trim());
    render();
  });
  render();
})();
